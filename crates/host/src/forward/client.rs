//! The outbound HTTP client: a pool of keep-alive HTTP/1.1 connections, plain or over TLS
//! (rustls with `ring`), used to proxy to upstreams and to fetch JWK Sets.
//!
//! ```text
//!  request ─▶ pool: idle connection to host:port? ──yes──▶ send
//!               │ no                                        ▲
//!               ▼                                           │
//!          connect (≤ connect_timeout: TCP, then TLS) ───────┘
//!  after the response: back to the pool (≤ max_idle idle ones, each ≤ idle_timeout)
//! ```
//!
//! A request is only retried by the pool when it was never written (the pooled connection
//! turned out closed before the first byte went out), which is safe for any method. Nothing
//! else is retried: a request that may have reached the upstream is never sent twice.
//!
//! A pool for deployed workers' fetches carries a [`Guard`]: it resolves the host itself and
//! connects only to the addresses the guard allows (crate::capability::reach), so a name that
//! resolves to this host is refused like the address, before any byte is sent.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::capability::reach::Guard;
use crate::observe::metrics::Level;
use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpStream;

/// The pooled client type.
pub(crate) type HttpClient = Client<HttpsConnector<Counting>, Full<Bytes>>;

/// How one pool is set up.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings<'a> {
    pub(crate) connect_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_idle: usize,
    /// CA certificates to trust instead of the public (webpki) roots.
    pub(crate) ca_file: Option<&'a Path>,
    /// The `upstream` label of its `edgegate_upstream_connections` gauge.
    pub(crate) name: &'a str,
    /// Where its connections may go.
    pub(crate) guard: Guard,
}

/// Why a pool could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The `ca_file` cannot be read as PEM.
    #[error("cannot read CA certificates from `{}`", path.display())]
    ReadCa {
        path: std::path::PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The `ca_file` has no certificate rustls can use.
    #[error("no CA certificate in `{}`", path.display())]
    NoCa { path: std::path::PathBuf },
    /// rustls refused the protocol versions.
    #[error("TLS setup")]
    Tls(#[source] rustls::Error),
}

/// A pool with these settings. Fails only on an unreadable or empty `ca_file`.
pub(crate) fn build(settings: &ClientSettings<'_>) -> Result<HttpClient, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    match settings.ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|source| ClientError::ReadCa { path: path.to_owned(), source })?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(ClientError::NoCa { path: path.to_owned() });
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();

    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(settings.connect_timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(Counting {
            inner: http,
            open: crate::observe::metrics::gauge(
                "edgegate_upstream_connections",
                vec![("upstream", settings.name.to_owned())],
            ),
            guard: settings.guard,
            connect_timeout: settings.connect_timeout,
        });
    Ok(Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(settings.idle_timeout)
        .pool_max_idle_per_host(settings.max_idle)
        .timer(TokioTimer::new())
        .build(connector))
}

/// How a request to a server failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendFailure {
    /// No connection could be made (refused, unreachable, TLS failed).
    Connect,
    /// A timeout: connecting, or waiting for the response head.
    Timeout,
    /// The connection broke, or the response was not HTTP.
    BadResponse,
}

/// Sorts a client error into what the caller answers.
pub(crate) fn classify(error: &hyper_util::client::legacy::Error) -> SendFailure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return SendFailure::Timeout;
        }
        source = e.source();
    }
    if error.is_connect() { SendFailure::Connect } else { SendFailure::BadResponse }
}

/// hyper-util's connector, counting the connections it has open in a gauge: the pool's size,
/// idle and busy together. With a guard that restricts, it resolves and connects itself, to
/// allowed addresses only.
#[derive(Clone)]
pub(crate) struct Counting {
    inner: HttpConnector,
    open: Arc<Level>,
    guard: Guard,
    connect_timeout: Duration,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection the pool's [`Guard`] refused: every address the host resolved to is one the
/// worker may not reach.
#[derive(Debug, thiserror::Error)]
#[error("`{host}` resolves only to addresses this worker may not reach ({addresses})")]
pub(crate) struct Unreachable {
    host: String,
    addresses: String,
}

impl tower_service::Service<http::Uri> for Counting {
    type Response = Counted;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Counted, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let open = self.open.clone();
        if self.guard.reach == crate::capability::reach::Reach::Anywhere {
            let connecting = self.inner.call(uri);
            return Box::pin(async move {
                let io = connecting.await?;
                open.add(1);
                Ok(Counted { io, open })
            });
        }
        let (guard, timeout) = (self.guard, self.connect_timeout);
        Box::pin(async move {
            let stream = guarded_connect(&uri, guard, timeout).await?;
            open.add(1);
            Ok(Counted { io: TokioIo::new(stream), open })
        })
    }
}

/// Resolves `uri`'s host and connects to the first address `guard` allows that answers.
async fn guarded_connect(
    uri: &http::Uri,
    guard: Guard,
    timeout: Duration,
) -> Result<TcpStream, BoxError> {
    let host = uri.host().unwrap_or_default().trim_matches(['[', ']']).to_owned();
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let resolved: Vec<std::net::SocketAddr> =
        tokio::time::timeout(timeout, tokio::net::lookup_host((host.as_str(), port)))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "resolving timed out"))??
            .collect();
    let (allowed, refused): (Vec<_>, Vec<_>) =
        resolved.into_iter().partition(|addr| guard.allows(*addr));
    if allowed.is_empty() {
        let addresses: Vec<String> = refused.iter().map(ToString::to_string).collect();
        return Err(Box::new(Unreachable { host, addresses: addresses.join(", ") }));
    }
    let mut last = None;
    for addr in allowed {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Ok(Err(e)) => last = Some(e),
            Err(_) => {
                last = Some(std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))
            }
        }
    }
    Err(Box::new(last.unwrap_or_else(|| std::io::Error::other("no address answered"))))
}

/// Whether `error` (a client's) is a connection its pool's guard refused.
pub(crate) fn refused_by_guard(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.is::<Unreachable>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// A connection that lowers its pool's gauge when it closes.
pub(crate) struct Counted {
    io: TokioIo<TcpStream>,
    open: Arc<Level>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.open.add(-1);
    }
}

impl Connection for Counted {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl hyper::rt::Read for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}
