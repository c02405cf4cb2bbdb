//! `[server.tls]`: the TLS listener, its certificates, versions, resumption and client
//! certificates. The files are read and checked when a snapshot is built (crate::listen::tls).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigError;

/// `[server.tls]`: a second listener that terminates TLS (HTTP/1.1 and h2 by ALPN).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Address of the TLS listener. Default `127.0.0.1:8443`.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// The certificates, each chosen for the names its certificate carries (exact names
    /// first, then wildcards); the one marked `default` (or else the first) answers a client
    /// that sends no name or a name no certificate has.
    pub certificates: Vec<CertificateConfig>,
    /// TLS versions offered: `"1.2"`, `"1.3"`. Default both.
    #[serde(default = "default_versions")]
    pub versions: Vec<TlsVersion>,
    /// TLS handshakes in progress at once at most, counted from a whole ClientHello; more
    /// wait for one to end, within `server.handshake_timeout`. Default 256.
    #[serde(default = "default_max_handshakes")]
    pub max_handshakes: usize,
    /// Sessions the server remembers for resumption by session id (TLS 1.2) and by stateful
    /// ticket; 0 turns the cache off. Default 8192.
    #[serde(default = "default_session_cache")]
    pub session_cache: usize,
    /// Stateless session tickets (RFC 5077, TLS 1.3 tickets), encrypted with keys that rotate
    /// every 6 hours. Default true.
    #[serde(default = "yes")]
    pub tickets: bool,
    /// Client certificates (mutual TLS), for an internal edge.
    #[serde(default)]
    pub client_auth: Option<ClientAuthConfig>,
}

/// One certificate chain and its private key, PEM files.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateConfig {
    /// The chain: the leaf certificate first, then its intermediates.
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The certificate for clients that send no name, or one no certificate has.
    #[serde(default)]
    pub default: bool,
}

/// `[server.tls.client_auth]`: which client certificates are accepted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientAuthConfig {
    /// PEM file of the certificate authorities a client certificate must chain to.
    pub ca: PathBuf,
    /// Refuse the handshake of a client without a certificate. Default true; false lets such
    /// a client in (a client that sends a certificate must still send a valid one).
    #[serde(default = "yes")]
    pub required: bool,
}

/// A TLS protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TlsVersion {
    /// TLS 1.2.
    #[serde(rename = "1.2")]
    Tls12,
    /// TLS 1.3.
    #[serde(rename = "1.3")]
    Tls13,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8443))
}

fn default_versions() -> Vec<TlsVersion> {
    vec![TlsVersion::Tls12, TlsVersion::Tls13]
}

fn default_max_handshakes() -> usize {
    256
}

fn default_session_cache() -> usize {
    8192
}

fn yes() -> bool {
    true
}

/// Checks what the types alone cannot.
pub(super) fn validate(tls: &TlsConfig, file: &str) -> Result<(), ConfigError> {
    let at =
        |key: &str, message: &str| Err(ConfigError::at(file, format!("server.tls.{key}"), message));
    if tls.certificates.is_empty() {
        return at("certificates", "must name at least one certificate");
    }
    if tls.certificates.iter().filter(|c| c.default).count() > 1 {
        return at("certificates", "at most one certificate can be the default");
    }
    if tls.versions.is_empty() {
        return at("versions", "must name at least one of \"1.2\", \"1.3\"");
    }
    if tls.max_handshakes == 0 {
        return at("max_handshakes", "must be at least 1");
    }
    Ok(())
}
