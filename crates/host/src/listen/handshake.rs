//! The TLS handshake of one accepted connection, bounded: the whole of it must end within
//! `handshake_timeout` of accept, and its cryptography waits for one of `max_handshakes`
//! places.
//!
//! ```text
//!  accept ─▶ first byte: 0x16 (a TLS record)? ─▶ whole ClientHello ─▶ place (max_handshakes) ─▶ rustls handshake ─▶ served
//!              └─ anything else: plain HTTP ─▶ 400, then closed
//!  all of it past handshake_timeout from accept: closed
//! ```
//!
//! A place is taken only once a whole ClientHello has arrived: until then a connection costs
//! a socket (bounded by `max_connections`), not a place, so clients that send a few bytes and
//! stall cannot keep others from the handshakes.
//!
//! Each outcome is counted: `edgegate_tls_handshakes_total{version,alpn}` for a success,
//! `edgegate_tls_handshake_failures_total{reason}` (`timeout`, `plain_http`, `error`) for a
//! failure.

use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;

use crate::listen::conn::TlsInfo;

/// The first byte of a TLS handshake record (RFC 8446 §5.1, content type 22).
const HANDSHAKE_RECORD: u8 = 0x16;

/// How long a plain-HTTP client's leftover bytes are read (and dropped) after its 400, so
/// closing does not reset the connection before the client has read the answer.
const LINGER: Duration = Duration::from_secs(1);

/// The answer to plain HTTP sent to the TLS port.
const PLAIN_HTTP: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
connection: close\r\ncontent-length: 30\r\n\r\n{\"error\":\"plain_http_on_tls\"}\n";

/// Handshakes `stream` with `config` by `deadline`; `None` when it failed (counted, and the
/// connection closed).
pub(crate) async fn handshake(
    stream: TcpStream,
    config: Arc<ServerConfig>,
    places: &Semaphore,
    deadline: Instant,
) -> Option<(TlsStream<TcpStream>, TlsInfo)> {
    let outcome = tokio::time::timeout_at(deadline, async {
        let mut first = [0u8; 1];
        let n = stream.peek(&mut first).await.map_err(|_| Failure::Error)?;
        if n == 0 {
            return Err(Failure::Error);
        }
        if first[0] != HANDSHAKE_RECORD {
            return Err(Failure::PlainHttp(stream));
        }
        let acceptor = rustls::server::Acceptor::default();
        let hello = tokio_rustls::LazyConfigAcceptor::new(acceptor, stream).await;
        let hello = hello.map_err(|_| Failure::Error)?;
        let _place = places.acquire().await.map_err(|_| Failure::Error)?;
        hello.into_stream(config).await.map_err(|_| Failure::Error)
    })
    .await;
    let failure = match outcome {
        Ok(Ok(stream)) => {
            let info = TlsInfo::of(stream.get_ref().1);
            metrics::counter!(
                "edgegate_tls_handshakes_total",
                "version" => info.version,
                "alpn" => info.alpn,
            )
            .increment(1);
            return Some((stream, info));
        }
        Ok(Err(failure)) => failure,
        Err(_) => Failure::Timeout,
    };
    metrics::counter!("edgegate_tls_handshake_failures_total", "reason" => failure.reason())
        .increment(1);
    if let Failure::PlainHttp(stream) = failure {
        answer_plain_http(stream).await;
    }
    None
}

/// Why a handshake failed.
enum Failure {
    /// Not done within the handshake timeout.
    Timeout,
    /// The client spoke plain HTTP (or anything but TLS).
    PlainHttp(TcpStream),
    /// rustls refused it (no shared version or cipher, a bad client certificate, a broken
    /// record), or the client went away.
    Error,
}

impl Failure {
    fn reason(&self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::PlainHttp(_) => "plain_http",
            Self::Error => "error",
        }
    }
}

/// Answers 400 and closes cleanly: the answer, then end of output, then the client's bytes
/// read for at most [`LINGER`].
async fn answer_plain_http(mut stream: TcpStream) {
    if stream.write_all(PLAIN_HTTP).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}
