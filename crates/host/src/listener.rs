//! The sockets: the HTTP listener (HTTP/1.1 and h2c on one port), the admin listener, and
//! graceful shutdown.
//!
//! ```text
//!   accept ──(max_connections)──▶ hyper auto: h1 (header timeout, size, count) | h2c
//!      │                               └─▶ Gateway::handle per request
//!   shutdown signal ─▶ stop accepting ─▶ /healthz says draining ─▶ finish in-flight requests
//!                      (idle keep-alive connections close)        (at most shutdown_timeout)
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::admin;
use crate::gateway::Gateway;
use crate::upstream::ConnInfo;

/// hyper's smallest read buffer.
const MIN_BUF_SIZE: u64 = 8192;

/// A gateway bound to its addresses, ready to serve.
#[derive(Debug)]
pub struct Server {
    gateway: Arc<Gateway>,
    http: TcpListener,
    admin: TcpListener,
}

impl Server {
    /// Binds the HTTP and admin listeners.
    pub async fn bind(
        gateway: Gateway,
        listen: SocketAddr,
        admin: SocketAddr,
    ) -> std::io::Result<Self> {
        let http = TcpListener::bind(listen).await?;
        let admin = TcpListener::bind(admin).await?;
        Ok(Self { gateway: Arc::new(gateway), http, admin })
    }

    /// Where the HTTP listener is bound (useful after binding port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.http.local_addr()
    }

    /// Where the admin listener is bound.
    pub fn admin_addr(&self) -> std::io::Result<SocketAddr> {
        self.admin.local_addr()
    }

    /// Serves until `shutdown` completes, then stops accepting and drains in-flight requests
    /// for at most `shutdown_timeout`.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let server = self.gateway.server().clone();
        let draining = Arc::new(AtomicBool::new(false));
        let admin = tokio::spawn(admin::serve(self.admin, draining.clone()));

        let mut builder = auto::Builder::new(TokioExecutor::new());
        let mut http1 = builder.http1();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(server.header_read_timeout)
            .max_buf_size(server.max_header_bytes.bytes().max(MIN_BUF_SIZE) as usize);
        // hyper keeps up to 100 headers on the stack; asking for another count moves them to
        // the heap, so only do it when configured.
        if server.max_headers != 100 {
            http1.max_headers(server.max_headers);
        }
        builder.http2().timer(TokioTimer::new()).max_header_list_size(
            u32::try_from(server.max_header_bytes.bytes()).unwrap_or(u32::MAX),
        );

        let graceful = GracefulShutdown::new();
        let connections = Arc::new(Semaphore::new(server.max_connections));
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                permit = connections.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
                () = &mut shutdown => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = self.http.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, most likely: back off instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = stream.set_nodelay(true);
            let gateway = self.gateway.clone();
            let conn = ConnInfo { peer, tls: false };
            let service = service_fn(move |request| {
                let gateway = gateway.clone();
                async move { Ok::<_, std::convert::Infallible>(gateway.handle(request, conn).await) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                drop(permit);
            });
        }

        drop(self.http);
        draining.store(true, Ordering::Relaxed);
        tracing::info!(timeout = ?server.shutdown_timeout, "shutting down: no longer accepting, draining in-flight requests");
        match tokio::time::timeout(server.shutdown_timeout, graceful.shutdown()).await {
            Ok(()) => tracing::info!("drained"),
            Err(_) => tracing::warn!("shutdown timeout: exiting with requests still in flight"),
        }
        admin.abort();
    }
}

/// Installs the SIGINT and SIGTERM handlers now, and returns a future that completes when
/// either signal arrives.
///
/// The handlers are installed before this returns, not on the future's first poll: a signal
/// that arrives after the gateway has announced its addresses but before the accept loop first
/// polls the future must still drain, not kill the process with the default action.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("SIGINT received"),
            _ = terminate.recv() => tracing::info!("SIGTERM received"),
        }
    })
}
