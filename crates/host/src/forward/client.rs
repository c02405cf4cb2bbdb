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

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

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
/// idle and busy together.
#[derive(Clone)]
pub(crate) struct Counting {
    inner: HttpConnector,
    open: Arc<Level>,
}

impl tower_service::Service<http::Uri> for Counting {
    type Response = Counted;
    type Error = <HttpConnector as tower_service::Service<http::Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Counted, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let open = self.open.clone();
        Box::pin(async move {
            let io = connecting.await?;
            open.add(1);
            Ok(Counted { io, open })
        })
    }
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
