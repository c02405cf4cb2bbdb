//! Workers in an OCI registry: references (`oci://HOST[:PORT]/REPO:TAG` or `…@sha256:DIGEST`),
//! credentials (from the environment or a docker `config.json`, never the configuration), and
//! the Wasm artifact layout `wkg oci push` and wasmCloud use: one `application/wasm` layer and a
//! config of type `application/vnd.wasm.config.v0+json`.
//!
//! Plain HTTP is used only for a registry on loopback, or when the caller says `insecure`.

use std::net::IpAddr;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

/// The scheme of a worker's `module` that names a registry artifact.
pub const SCHEME: &str = "oci://";
/// A Wasm module's or component's layer.
pub const WASM_LAYER: &str = "application/wasm";
/// The Wasm artifact's config.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The user name and password for every registry, when set (both or neither).
pub const USERNAME_ENV: &str = "EDGEGATE_REGISTRY_USERNAME";
/// See [`USERNAME_ENV`].
pub const PASSWORD_ENV: &str = "EDGEGATE_REGISTRY_PASSWORD";

/// Why a registry call failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Not `oci://HOST[:PORT]/REPO:TAG` or `…@sha256:DIGEST`.
    #[error(
        "`{0}` is not a reference: use oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:DIGEST"
    )]
    BadReference(String),
    /// The credentials could not be read.
    #[error("credentials: {0}")]
    Credentials(String),
    /// Not a WebAssembly module or component.
    #[error("not WebAssembly (no `\\0asm` header)")]
    NotWasm,
    /// The registry refused or failed.
    #[error("{registry}: {source}")]
    Registry {
        /// The registry, `host[:port]`.
        registry: String,
        /// What it said, or why it could not be reached.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
}

/// What a push made: the manifest's digest (what a tag resolves to) and the layer's (the
/// module's own sha256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `sha256:…` of the manifest.
    pub manifest: String,
    /// `sha256:…` of the module.
    pub layer: String,
}

/// Parses `oci://HOST[:PORT]/REPO:TAG` or `…@sha256:DIGEST`.
pub fn parse(text: &str) -> Result<Reference, RegistryError> {
    let bad = || RegistryError::BadReference(text.to_owned());
    let rest = text.strip_prefix(SCHEME).ok_or_else(bad)?;
    // Without a host, the parser would take Docker Hub; a reference here always names one.
    let (host, path) = rest.split_once('/').ok_or_else(bad)?;
    if host.is_empty()
        || path.is_empty()
        || !(host.contains('.') || host.contains(':') || host == "localhost")
    {
        return Err(bad());
    }
    // A tag or a digest, always: no implicit `latest`.
    let name = path.rsplit('/').next().unwrap_or_default();
    if !(name.contains(':') || path.contains('@')) {
        return Err(bad());
    }
    rest.parse().map_err(|_| bad())
}

/// A client for `reference`'s registry: HTTPS, or plain HTTP for loopback or when `insecure`.
fn client(reference: &Reference, insecure: bool) -> Client {
    // reqwest's rustls takes the process's provider: ring, the one edgegate uses (installing
    // it again is refused, harmlessly).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = reference.resolve_registry().to_owned();
    let protocol = if is_loopback(&registry) || insecure {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig { protocol, ..Default::default() })
}

/// Whether `registry` (`host[:port]`) is this machine.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The credentials for `registry`: [`USERNAME_ENV`] and [`PASSWORD_ENV`], else the `auths`
/// entry of the docker `config.json` (`$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`), else none.
pub fn credentials(registry: &str) -> Result<RegistryAuth, RegistryError> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (env(USERNAME_ENV), env(PASSWORD_ENV)) {
        (Some(user), Some(password)) => return Ok(RegistryAuth::Basic(user, password)),
        (None, None) => {}
        _ => {
            return Err(RegistryError::Credentials(format!(
                "set both {USERNAME_ENV} and {PASSWORD_ENV}, or neither"
            )));
        }
    }
    let file = match (env("DOCKER_CONFIG"), env("HOME")) {
        (Some(dir), _) => std::path::Path::new(&dir).join("config.json"),
        (None, Some(home)) => std::path::Path::new(&home).join(".docker/config.json"),
        (None, None) => return Ok(RegistryAuth::Anonymous),
    };
    let Ok(text) = std::fs::read_to_string(&file) else { return Ok(RegistryAuth::Anonymous) };
    docker_auth(&text, registry)
        .map_err(|why| RegistryError::Credentials(format!("{}: {why}", file.display())))
}

/// The `auths.REGISTRY.auth` entry (base64 of `user:password`) of a docker `config.json`.
fn docker_auth(text: &str, registry: &str) -> Result<RegistryAuth, String> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Some(encoded) = json["auths"][registry]["auth"].as_str() else {
        return Ok(RegistryAuth::Anonymous);
    };
    use base64ct::Encoding as _;
    let decoded = base64ct::Base64::decode_vec(encoded)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| format!("auths.{registry}.auth is not base64"))?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or_else(|| format!("auths.{registry}.auth is not user:password"))?;
    Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

/// Publishes `wasm` (a module or a component) as `reference`.
pub async fn push(wasm: Vec<u8>, reference: &str, insecure: bool) -> Result<Pushed, RegistryError> {
    let reference = parse(reference)?;
    let registry = reference.resolve_registry().to_owned();
    if !wasm.starts_with(b"\0asm") {
        return Err(RegistryError::NotWasm);
    }
    let layer_digest = format!("sha256:{}", edgegate_runtime::module_digest(&wasm));
    let os = match edgegate_runtime::Abi::of(&wasm) {
        edgegate_runtime::Abi::HttpComponent => "wasip2",
        edgegate_runtime::Abi::Core => "wasip1",
    };
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": os,
        "layerDigests": [layer_digest],
    });
    let config = Config::new(config.to_string().into_bytes(), WASM_CONFIG.to_owned(), None);
    let layer = ImageLayer::new(wasm, WASM_LAYER.to_owned(), None);
    let auth = credentials(&registry)?;
    let failed = |source| RegistryError::Registry { registry: registry.clone(), source };
    let client = client(&reference, insecure);
    let pushed = client.push(&reference, &[layer], config, &auth, None).await.map_err(failed)?;
    let manifest = pushed.manifest_url.rsplit('/').next().unwrap_or_default().to_owned();
    Ok(Pushed { manifest, layer: layer_digest })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_a_host_and_a_tag_or_digest() {
        let ok = parse("oci://registry.example:5000/workers/echo:v1").unwrap();
        assert_eq!(
            (ok.registry(), ok.repository(), ok.tag()),
            ("registry.example:5000", "workers/echo", Some("v1"))
        );
        let digest = format!("oci://127.0.0.1:5000/echo@sha256:{}", "a".repeat(64));
        assert!(parse(&digest).unwrap().digest().is_some());
        for bad in [
            "oci://echo:v1",
            "oci://workers/echo:v1",
            "oci://127.0.0.1:5000/echo",
            "ghcr.io/x/y:1",
            "oci://",
        ] {
            assert!(matches!(parse(bad), Err(RegistryError::BadReference(_))), "{bad}");
        }
    }

    #[test]
    fn a_docker_config_gives_the_registry_s_credentials() {
        // base64 of "ada:s3cret"
        let text = r#"{"auths":{"registry.example:5000":{"auth":"YWRhOnMzY3JldA=="}}}"#;
        let basic = docker_auth(text, "registry.example:5000").unwrap();
        assert!(matches!(basic, RegistryAuth::Basic(u, p) if u == "ada" && p == "s3cret"));
        assert!(matches!(docker_auth(text, "other:5000"), Ok(RegistryAuth::Anonymous)));
        let broken = r#"{"auths":{"r":{"auth":"!!"}}}"#;
        assert!(docker_auth(broken, "r").unwrap_err().contains("not base64"));
        assert!(docker_auth("{", "r").is_err());
    }

    #[test]
    fn only_loopback_is_plain_http_without_insecure() {
        for host in ["127.0.0.1:5000", "localhost:5000", "[::1]:5000", "127.0.0.2"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.1:5000", "registry.example", "ghcr.io"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
