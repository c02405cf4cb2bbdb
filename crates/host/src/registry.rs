//! Workers in an OCI registry: references (`oci://HOST[:PORT]/REPO:TAG` or `…@sha256:DIGEST`),
//! credentials (from the environment or a docker `config.json`, never the configuration), and
//! the Wasm artifact layout `wkg oci push` and wasmCloud use: one `application/wasm` layer and a
//! config of type `application/vnd.wasm.config.v0+json`.
//!
//! Plain HTTP is used only for a registry on loopback, or one the caller calls `insecure`.

use std::net::IpAddr;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::{Client, Reference};

mod clients;
mod credentials;
mod pull;
mod push;
mod store;

pub use clients::Clients;
pub use credentials::{Credentials, HOST_ENV, PASSWORD_ENV, USERNAME_ENV};
pub use pull::{Pull, Pulled, Resolution};
pub use push::{Pushed, push};
pub use store::{Digest, Store};

/// The scheme of a worker's `module` that names a registry artifact.
pub const SCHEME: &str = "oci://";
/// A Wasm module's or component's layer.
pub const WASM_LAYER: &str = "application/wasm";
/// The Wasm artifact's config.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";

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
    #[error("{registry}")]
    Registry {
        /// The registry, `host[:port]`.
        registry: String,
        /// What it said, or why it could not be reached.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The registry took longer than `[registry] timeout`.
    #[error("{registry}: no answer within {}", humantime::format_duration(*.after))]
    Timeout {
        /// The registry, `host[:port]`.
        registry: String,
        /// The timeout.
        after: Duration,
    },
    /// The artifact is not a worker: not exactly one `application/wasm` layer.
    #[error("not a Wasm artifact: {0}")]
    NotAWorker(String),
    /// The layer is larger than `[registry] max_module`, or than the deployer's
    /// `caps.module`.
    #[error(
        "the module is {size} bytes, more than the largest allowed ({max}: registry.max_module, or its deployer's caps.module)"
    )]
    TooLarge {
        /// Its size, as the manifest or the download says.
        size: u64,
        /// The limit.
        max: edgegate_runtime::ByteSize,
    },
    /// The bytes received are not the ones the manifest names.
    #[error("the module's sha256 is {actual}, not the manifest's {expected}: refused")]
    Tampered {
        /// The manifest's layer digest.
        expected: String,
        /// The bytes'.
        actual: String,
    },
    /// The registry is out of reach and no earlier resolution of the reference is stored.
    #[error("{0}; and no earlier pull of it is stored")]
    Unreachable(Box<RegistryError>),
    /// The on-disk store of pulled modules failed.
    #[error("the store of pulled modules, {}", path.display())]
    Store {
        /// The file or directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl RegistryError {
    /// Whether the registry could not be reached or failed on its side (connection refused,
    /// a timeout, a 5xx), as opposed to an answer that refuses the reference: only then may
    /// a start fall back on what was stored.
    fn is_unreachable(&self) -> bool {
        use oci_client::errors::OciDistributionError as E;
        match self {
            Self::Timeout { .. } => true,
            Self::Registry { source: E::RequestError(e), .. } => {
                // No connection, no answer in time, or one cut off.
                e.is_connect() || e.is_timeout() || e.is_body()
            }
            Self::Registry { source: E::ServerError { code, .. }, .. } => *code >= 500,
            _ => false,
        }
    }
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
fn client(reference: &Reference, insecure: bool, timeout: Option<Duration>) -> Client {
    // reqwest's rustls takes the process's provider: ring, the one edgegate uses (installing
    // it again is refused, harmlessly).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = reference.resolve_registry().to_owned();
    let protocol = if is_loopback(&registry) || insecure {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        connect_timeout: timeout.map(|t| t.min(CONNECT_TIMEOUT)),
        read_timeout: timeout,
        ..Default::default()
    })
}

/// The longest a connection to a registry may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `registry` (`host[:port]`) is this machine.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
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
    fn only_loopback_is_plain_http_without_insecure() {
        for host in ["127.0.0.1:5000", "localhost:5000", "[::1]:5000", "127.0.0.2"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.1:5000", "registry.example", "ghcr.io"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
