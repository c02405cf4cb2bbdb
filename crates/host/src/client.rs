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

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// The pooled client type.
pub(crate) type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How one pool is set up.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings<'a> {
    pub(crate) connect_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_idle: usize,
    /// CA certificates to trust instead of the public (webpki) roots.
    pub(crate) ca_file: Option<&'a Path>,
}

/// A pool with these settings. Fails only on an unreadable or empty `ca_file`.
pub(crate) fn build(settings: &ClientSettings<'_>) -> Result<HttpClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    match settings.ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    format!("cannot read CA certificates from `{}`: {e}", path.display())
                })?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("no CA certificate in `{}`", path.display()));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
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
        .wrap_connector(http);
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
