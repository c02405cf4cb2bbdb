//! What a request knows of the connection it came on: the client's address and what its TLS
//! handshake negotiated. A leaf: the listeners make it, and forwarding and the access log
//! read it.

use std::net::SocketAddr;

/// Where a request came from, for the forwarding headers and the access log.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    /// The client's address.
    pub peer: SocketAddr,
    /// What the client's TLS connection negotiated; `None` for plain HTTP.
    pub tls: Option<TlsInfo>,
}

/// What a TLS handshake negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsInfo {
    /// `TLSv1.2` or `TLSv1.3`.
    pub version: &'static str,
    /// The ALPN protocol: `h2`, `http/1.1`, or `-` when the client offered none.
    pub alpn: &'static str,
}

impl TlsInfo {
    /// What `connection` negotiated.
    pub(crate) fn of(connection: &rustls::ServerConnection) -> Self {
        let version = match connection.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "-",
        };
        let alpn = match connection.alpn_protocol() {
            Some(b"h2") => "h2",
            Some(b"http/1.1") => "http/1.1",
            _ => "-",
        };
        Self { version, alpn }
    }
}
