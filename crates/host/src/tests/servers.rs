//! Real loopback servers for the gateway to talk to: an HTTP upstream that records what it
//! gets, and raw TCP peers that misbehave on purpose.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A request as the upstream received it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: http::Method,
    pub(crate) uri: http::Uri,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Bytes,
}

type Handler = dyn Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync;

/// An HTTP/1.1 server on loopback that answers with `handler` and records every request.
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
    pub(crate) connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    pub(crate) async fn start(
        handler: impl Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(None, handler).await
    }

    /// [`Upstream::start`] over TLS with `acceptor`'s certificate.
    pub(crate) async fn start_tls(
        acceptor: tokio_rustls::TlsAcceptor,
        handler: impl Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(Some(acceptor), handler).await
    }

    async fn start_with(
        tls: Option<tokio_rustls::TlsAcceptor>,
        handler: impl Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let task = tokio::spawn({
            let (seen, connections) = (seen.clone(), connections.clone());
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else { continue };
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (seen, handler, tls) = (seen.clone(), handler.clone(), tls.clone());
                    tokio::spawn(async move {
                        let service = service_fn(move |request: Request<Incoming>| {
                            let (seen, handler) = (seen.clone(), handler.clone());
                            async move {
                                let (parts, body) = request.into_parts();
                                let body =
                                    body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                                let request = Seen {
                                    method: parts.method,
                                    uri: parts.uri,
                                    headers: parts.headers,
                                    body,
                                };
                                let response = handler(&request);
                                seen.lock().unwrap().push(request);
                                Ok::<_, Infallible>(response)
                            }
                        });
                        match tls {
                            None => {
                                let io = TokioIo::new(stream);
                                let _ = http1::Builder::new().serve_connection(io, service).await;
                            }
                            Some(tls) => {
                                let Ok(stream) = tls.accept(stream).await else { return };
                                let io = TokioIo::new(stream);
                                let _ = http1::Builder::new().serve_connection(io, service).await;
                            }
                        }
                    });
                }
            }
        });
        Self { addr, seen, connections, task }
    }

    /// An upstream that answers `{"ok":true}` with a few headers of its own.
    pub(crate) async fn json() -> Self {
        Self::start(|_| {
            Response::builder()
                .status(201)
                .header("content-type", "application/json")
                .header("x-upstream", "yes")
                .header("connection", "x-upstream-secret")
                .header("x-upstream-secret", "hop")
                .header("keep-alive", "timeout=5")
                .body(Full::new(Bytes::from_static(br#"{"ok":true}"#)))
                .unwrap()
        })
        .await
    }

    pub(crate) fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// How a raw peer misbehaves.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Misbehave {
    /// Accepts, reads, never answers.
    Hang,
    /// Reads the request head, then closes without a byte.
    CloseAfterRequest,
    /// Answers something that is not HTTP.
    Garbage,
    /// Sends a response head promising a body, then stalls.
    StallBody,
}

/// A TCP peer on loopback that misbehaves; counts the requests it saw start.
pub(crate) struct Raw {
    pub(crate) addr: SocketAddr,
    pub(crate) requests: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Raw {
    pub(crate) async fn start(how: Misbehave) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let requests = requests.clone();
            async move {
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else { continue };
                    let requests = requests.clone();
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut buf = [0u8; 4096];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        requests.fetch_add(1, Ordering::SeqCst);
                        match how {
                            Misbehave::Hang => std::future::pending::<()>().await,
                            Misbehave::CloseAfterRequest => drop(stream),
                            Misbehave::Garbage => {
                                let _ = stream.write_all(b"SMTP READY\r\n\r\n").await;
                            }
                            Misbehave::StallBody => {
                                let _ = stream
                                    .write_all(
                                        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nfirst",
                                    )
                                    .await;
                                std::future::pending::<()>().await
                            }
                        }
                    });
                }
            }
        });
        Self { addr, requests, task }
    }
}

/// An address nothing listens on.
pub(crate) async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// A TLS acceptor with a fresh self-signed certificate for `localhost` and 127.0.0.1, and that
/// certificate in PEM (to trust it as a CA).
pub(crate) fn self_signed() -> (tokio_rustls::TlsAcceptor, String) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let pem = cert.cert.pem();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    (tokio_rustls::TlsAcceptor::from(Arc::new(config)), pem)
}
