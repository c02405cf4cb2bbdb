//! `[workers.NAME.jwt]`: a worker's token policy and the sources of its keys.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, duration, optional_duration};
use edgegate_runtime::ByteSize;

/// `[workers.NAME.jwt]`: the worker's token policy and its keys. The keys stay in the host;
/// the policy reaches the worker as `jwt.*` configuration values (see
/// `edgegate_sdk::jwt::Validation::from_config`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// `iss` must be exactly this. Default: not checked.
    pub issuer: Option<String>,
    /// `aud` must name one of these. Default: not checked (the auth-router routes on it).
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Clock skew allowed for `exp`, `nbf` and `iat`. Default 60s.
    #[serde(default = "default_leeway", deserialize_with = "duration")]
    pub leeway: Duration,
    /// Claims that must be present. Default `["exp"]`.
    #[serde(default = "default_required_claims")]
    pub required_claims: Vec<String>,
    /// Tokens longer than this are refused before any decoding. Default 8KiB.
    #[serde(default = "default_max_token")]
    pub max_token_bytes: ByteSize,
    /// Where the keys come from; at least one.
    pub keys: Vec<KeySourceConfig>,
}

fn default_leeway() -> Duration {
    Duration::from_secs(60)
}

fn default_required_claims() -> Vec<String> {
    vec!["exp".into()]
}

fn default_max_token() -> ByteSize {
    ByteSize(8 << 10)
}

/// One `[[workers.NAME.jwt.keys]]` entry: exactly one source of keys.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySourceConfig {
    /// The key id tokens name it by (`secret_*`, `pem*`, `jwk*`; a JWKS names its own).
    pub kid: Option<String>,
    /// The one algorithm the key verifies: required for secrets and PEM keys; for JWKs, the
    /// default for keys that name none (a JWK's own `alg` must agree).
    pub alg: Option<String>,
    /// An HMAC secret: the value of this environment variable, as bytes.
    pub secret_env: Option<String>,
    /// An HMAC secret: this file's bytes (one trailing newline removed).
    pub secret_file: Option<PathBuf>,
    /// A public key in PEM (`PUBLIC KEY` or `RSA PUBLIC KEY`).
    pub pem: Option<String>,
    /// A PEM file.
    pub pem_file: Option<PathBuf>,
    /// A JWK, as JSON text.
    pub jwk: Option<String>,
    /// A file with one JWK.
    pub jwk_file: Option<PathBuf>,
    /// A file with a JWK Set.
    pub jwks_file: Option<PathBuf>,
    /// A JWK Set fetched over HTTP(S), cached and refreshed in the background.
    pub jwks_url: Option<String>,
    /// Refresh interval when the response has no cache headers. Default 5m.
    #[serde(default, deserialize_with = "optional_duration")]
    pub refresh: Option<Duration>,
    /// Never refresh more often than this, whatever the cache headers say. Default 30s.
    #[serde(default, deserialize_with = "optional_duration")]
    pub min_refresh: Option<Duration>,
    /// Never keep a fetched set longer than this without refreshing. Default 24h.
    #[serde(default, deserialize_with = "optional_duration")]
    pub max_refresh: Option<Duration>,
    /// While refreshing fails, keep using the last set this long past its expiry. Default 1h.
    #[serde(default, deserialize_with = "optional_duration")]
    pub max_stale: Option<Duration>,
    /// Time for one fetch, connection included. Default 5s.
    #[serde(default, deserialize_with = "optional_duration")]
    pub timeout: Option<Duration>,
    /// PEM file of the CA certificates to trust for an `https` URL, instead of the public
    /// roots.
    pub ca_file: Option<PathBuf>,
}

impl KeySourceConfig {
    /// The names of the source fields that are set.
    pub(crate) fn sources(&self) -> Vec<&'static str> {
        [
            ("secret_env", self.secret_env.is_some()),
            ("secret_file", self.secret_file.is_some()),
            ("pem", self.pem.is_some()),
            ("pem_file", self.pem_file.is_some()),
            ("jwk", self.jwk.is_some()),
            ("jwk_file", self.jwk_file.is_some()),
            ("jwks_file", self.jwks_file.is_some()),
            ("jwks_url", self.jwks_url.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }
}

/// Checks the policy and that each key source names exactly one source.
pub(super) fn validate(jwt: &JwtConfig, at: &str, file: &str) -> Result<(), ConfigError> {
    let error = |key: String, message: String| Err(ConfigError::at(file, key, message));
    if jwt.keys.is_empty() {
        return error(format!("{at}.keys"), "needs at least one source of keys".into());
    }
    for (name, list) in [("audiences", &jwt.audiences), ("required_claims", &jwt.required_claims)] {
        if let Some(bad) = list.iter().find(|v| v.is_empty() || v.contains(',')) {
            return error(
                format!("{at}.{name}"),
                format!("`{bad}` cannot be empty or hold a comma"),
            );
        }
    }
    if jwt.max_token_bytes.bytes() < 64 {
        return error(format!("{at}.max_token_bytes"), "must be at least 64B".into());
    }
    for (i, source) in jwt.keys.iter().enumerate() {
        let key = format!("{at}.keys[{i}]");
        let sources = source.sources();
        let [kind] = sources[..] else {
            return error(
                key,
                format!(
                    "needs exactly one of secret_env, secret_file, pem, pem_file, jwk, jwk_file, \
                     jwks_file, jwks_url (found {})",
                    if sources.is_empty() { "none".into() } else { sources.join(", ") }
                ),
            );
        };
        if let Some(alg) = &source.alg
            && edgegate_runtime::keys::Alg::from_name(alg).is_none()
        {
            return error(
                format!("{key}.alg"),
                format!("`{alg}` is not one of HS256, HS384, HS512, RS256, PS256, ES256, EdDSA"),
            );
        }
        let needs_alg = matches!(kind, "secret_env" | "secret_file" | "pem" | "pem_file");
        if needs_alg && source.alg.is_none() {
            return error(format!("{key}.alg"), format!("is required with {kind}"));
        }
        if matches!(kind, "jwks_file" | "jwks_url") && source.kid.is_some() {
            return error(format!("{key}.kid"), "a JWK Set names its own keys".into());
        }
        let refresh_fields = [
            ("refresh", source.refresh.is_some()),
            ("min_refresh", source.min_refresh.is_some()),
            ("max_refresh", source.max_refresh.is_some()),
            ("max_stale", source.max_stale.is_some()),
            ("timeout", source.timeout.is_some()),
            ("ca_file", source.ca_file.is_some()),
        ];
        if kind != "jwks_url"
            && let Some((field, _)) = refresh_fields.iter().find(|(_, set)| *set)
        {
            return error(format!("{key}.{field}"), "only applies to jwks_url".into());
        }
        if let Some(url) = &source.jwks_url {
            let uri: Result<http::Uri, _> = url.parse();
            if !uri.as_ref().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some()
            }) {
                return error(format!("{key}.jwks_url"), format!("`{url}` is not an http(s) URL"));
            }
        }
    }
    Ok(())
}
