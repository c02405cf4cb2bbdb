//! `[server]`: the listeners and the limits every request is held to before any worker runs.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::tls::TlsConfig;
use super::{ConfigError, duration};
use crate::route::path::{EscapedSlashes, PathRules};
use edgegate_runtime::ByteSize;

/// `[server]`: listeners and the limits every request is held to before any worker runs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address of the HTTP listener (HTTP/1.1 and h2c on one port). Default `127.0.0.1:8080`.
    pub listen: SocketAddr,
    /// A TLS listener too (HTTP/1.1 and h2 by ALPN), when the table is present.
    pub tls: Option<TlsConfig>,
    /// Address of the admin listener (`/healthz`, `/metrics`, `/reload`). Default
    /// `127.0.0.1:9090`.
    pub admin: SocketAddr,
    /// Bind both listeners with `SO_REUSEPORT`, so that a new edgegate process can start on
    /// the same ports while the old one drains (docs/deploy.md). Default false: a second
    /// process on the same ports is refused.
    pub reuse_port: bool,
    /// How connections are spread over threads: `"work-stealing"` (the default: one tokio
    /// runtime whose worker threads, one per CPU, take each other's tasks) or `"per-core"`
    /// (a runtime of one thread per CPU, each accepting on its own `SO_REUSEPORT` listener
    /// and running its connections to the end, as NGINX's workers do).
    pub scheduler: Scheduler,
    /// Open client connections at most; past it, new connections wait in the kernel's accept
    /// queue. Default 4096.
    pub max_connections: usize,
    /// Open connections to the admin listener at most; past it, new ones wait in the kernel's
    /// accept queue. Default 64.
    pub admin_max_connections: usize,
    /// Requests running a worker at once, and the size of the instance pool. Past it, a request
    /// waits up to `queue_timeout`, then gets 503 with `Retry-After`. Default 256.
    pub max_concurrency: u32,
    /// How long a request may wait for a concurrency slot. Default 50ms.
    #[serde(deserialize_with = "duration")]
    pub queue_timeout: Duration,
    /// Request headers at most; more gets 431. Default 100.
    pub max_headers: usize,
    /// Bytes of request line and headers at most (at least 8KiB); more gets 431. Default 16KiB.
    pub max_header_bytes: ByteSize,
    /// Request body bytes at most, for every route; more gets 413. A worker's own
    /// `request_body` limit can only lower it. Default 16MiB.
    pub max_request_body: ByteSize,
    /// Time a new connection has to show it is HTTP: its first byte (HTTP/1.1), or the whole
    /// connection preface and first frame (h2c). Past it the connection is closed, so silent
    /// sockets cannot hold `max_connections`. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub handshake_timeout: Duration,
    /// Time a client has to send a request's headers, from their first byte: an HTTP/1.1
    /// request head, or an h2 header block (HEADERS to END_HEADERS). Past it the connection
    /// is closed. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is shut down: an HTTP/1.1
    /// keep-alive connection is closed, an h2 connection gets GOAWAY and is closed. A
    /// connection whose client takes no byte of its response for this long is closed.
    /// Default 60s.
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// How often an h2 connection is PINGed, idle or not; `"0s"` turns the pings off.
    /// Default 30s.
    #[serde(deserialize_with = "duration")]
    pub h2_keepalive_interval: Duration,
    /// How long a PING may go unanswered before the h2 connection is closed. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub h2_keepalive_timeout: Duration,
    /// Streams an h2 client may have open at once on one connection. Default 100.
    pub h2_max_concurrent_streams: u32,
    /// The h2 flow-control window of each stream: how much of a request body the client
    /// may send ahead of the worker reading it. Default 64KiB.
    pub h2_stream_window: ByteSize,
    /// The h2 flow-control window of a whole connection. Default 1MiB.
    pub h2_connection_window: ByteSize,
    /// Time a client has to send a whole request body; past it, 408. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub body_read_timeout: Duration,
    /// On SIGINT or SIGTERM, how long in-flight requests may take to finish before the process
    /// exits anyway. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub shutdown_timeout: Duration,
    /// Whether clients' `Forwarded`, `X-Forwarded-*`, `X-Real-IP`, `True-Client-IP` (and
    /// the like) headers are believed: set it only behind a proxy you run. By default (false)
    /// every one is removed, and `X-Forwarded-For`, `-Proto` and `-Host` are set to what this
    /// gateway saw; when true, the client's address is appended to `X-Forwarded-For` and the
    /// others are kept.
    pub trust_forwarded: bool,
    /// The proxies (addresses or CIDR networks) whose `X-Forwarded-For` or `Forwarded`
    /// header says who the client is, for rate limits keyed by `ip`. Default none: the
    /// peer's address is the client's.
    #[serde(deserialize_with = "networks")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The one header the trusted proxies write the client's address in:
    /// `"x-forwarded-for"` (the default) or `"forwarded"` (RFC 7239 `for=`). Only that header
    /// is read; the other is ignored, whatever it says, so a client cannot override what the
    /// proxy wrote by sending the header the proxy does not.
    pub client_address_header: ClientAddressHeader,
    /// Add a `server-timing` header to each response with the instantiate, guest and upstream
    /// durations (docs/observability.md). Off by default: it tells clients how long the
    /// gateway's parts took.
    pub server_timing: bool,
    /// Normalize request paths before routing (RFC 3986): decode escaped unreserved
    /// characters (`%2E` is `.`), remove `.` and `..` segments, and refuse a path that climbs
    /// above the root with 400 `invalid_path`. The worker and the upstream get the normalized
    /// path. Default true; off, paths are routed and forwarded exactly as received.
    pub normalize_path: bool,
    /// With `normalize_path`, merge repeated slashes: `/a//b` is `/a/b`. Default true.
    pub merge_slashes: bool,
    /// With `normalize_path`, what an escaped slash or backslash (`%2F`, `%5C`) gets:
    /// `"reject"` (400 `invalid_path`, the default) or `"keep"` (data inside its segment,
    /// forwarded escaped).
    pub escaped_slashes: EscapedSlashes,
}

/// `[server] client_address_header`: which header trusted proxies name the client in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientAddressHeader {
    /// `X-Forwarded-For: client, proxy1, …`.
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

/// `[server] scheduler`: how connections are spread over threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// One runtime, a worker thread per CPU, each free to take the others' tasks.
    #[default]
    WorkStealing,
    /// A single-threaded runtime per CPU, each with its own listener (`SO_REUSEPORT`: the
    /// kernel spreads new connections over them); a connection stays on the thread that
    /// accepted it.
    PerCore,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            tls: None,
            admin: SocketAddr::from(([127, 0, 0, 1], 9090)),
            reuse_port: false,
            scheduler: Scheduler::WorkStealing,
            max_connections: 4096,
            admin_max_connections: 64,
            max_concurrency: 256,
            queue_timeout: Duration::from_millis(50),
            max_headers: 100,
            max_header_bytes: ByteSize(16 << 10),
            max_request_body: ByteSize(16 << 20),
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            h2_keepalive_interval: Duration::from_secs(30),
            h2_keepalive_timeout: Duration::from_secs(10),
            h2_max_concurrent_streams: 100,
            h2_stream_window: ByteSize(64 << 10),
            h2_connection_window: ByteSize(1 << 20),
            body_read_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(30),
            trust_forwarded: false,
            trusted_proxies: Vec::new(),
            client_address_header: ClientAddressHeader::XForwardedFor,
            server_timing: false,
            normalize_path: true,
            merge_slashes: true,
            escaped_slashes: EscapedSlashes::Reject,
        }
    }
}

impl ServerConfig {
    /// How request paths are normalized.
    pub fn path_rules(&self) -> PathRules {
        PathRules {
            normalize: self.normalize_path,
            merge_slashes: self.merge_slashes,
            escaped_slashes: self.escaped_slashes,
        }
    }
}

/// Checks what the types alone cannot.
pub(super) fn validate(s: &ServerConfig, file: &str) -> Result<(), ConfigError> {
    let at = |key: String, message: &str| Err(ConfigError::at(file, key, message));
    if s.max_concurrency == 0 {
        return at("server.max_concurrency".into(), "must be at least 1");
    }
    if s.max_connections == 0 {
        return at("server.max_connections".into(), "must be at least 1");
    }
    if s.admin_max_connections == 0 {
        return at("server.admin_max_connections".into(), "must be at least 1");
    }
    if s.max_header_bytes.bytes() < 8192 {
        return at("server.max_header_bytes".into(), "must be at least 8KiB");
    }
    for (key, timeout) in [
        ("handshake_timeout", s.handshake_timeout),
        ("header_read_timeout", s.header_read_timeout),
        ("idle_timeout", s.idle_timeout),
        ("h2_keepalive_timeout", s.h2_keepalive_timeout),
    ] {
        if timeout.is_zero() {
            return at(format!("server.{key}"), "must be longer than zero");
        }
    }
    if s.h2_max_concurrent_streams == 0 {
        return at("server.h2_max_concurrent_streams".into(), "must be at least 1");
    }
    // RFC 9113 §6.9: a window is at most 2^31-1, and a connection's starts at 65535 and can
    // only be raised.
    for (key, window, least) in [
        ("h2_stream_window", s.h2_stream_window, 1),
        ("h2_connection_window", s.h2_connection_window, 65535),
    ] {
        if window.bytes() < least || window.bytes() > (1 << 31) - 1 {
            return at(
                format!("server.{key}"),
                &format!("must be between {least} bytes and 2GiB - 1"),
            );
        }
    }
    if let Some(tls) = &s.tls {
        super::tls::validate(tls, file)?;
    }
    Ok(())
}

/// Networks written as `10.0.0.0/8` or as one address (`192.0.2.1`, `::1`).
fn networks<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ipnet::IpNet>, D::Error> {
    let texts = Vec::<String>::deserialize(deserializer)?;
    texts
        .iter()
        .map(|text| {
            text.parse::<ipnet::IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "`{text}` is not an address or a network (`10.0.0.0/8`)"
                    ))
                })
        })
        .collect()
}
