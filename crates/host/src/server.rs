//! The sockets: the HTTP listener (HTTP/1.1 and h2c on one port), the admin listener, and
//! graceful shutdown.
//!
//! ```text
//!   accept ──(max_connections)──▶ hyper auto: h1 (header timeout, size, count) | h2c
//!      │         watchdog: handshake, h2 header block, idle (crate::listen::watchdog)
//!      │                               └─▶ Gateway::handle per request
//!   shutdown signal ─▶ stop accepting ─▶ /healthz says draining ─▶ finish in-flight requests
//!                      (h2: GOAWAY; HTTP/1.1: the next answer     (at most shutdown_timeout)
//!                       says Connection: close, idle ones close
//!                       after a short linger: crate::listen::watchdog)
//! ```

pub mod admin;
mod answer;
pub mod files;
mod per_core;
mod principal;
mod usage;
pub mod watch;
pub(crate) mod workers;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hyper::body::Incoming;
use hyper::header::{CONNECTION, HeaderValue};
use hyper::{Request, Version};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Semaphore;

use crate::config::{Scheduler, ServerConfig};
use crate::gateway::Gateway;
use crate::listen::accept::Acceptor;
use crate::listen::conn::ConnInfo;
use crate::listen::watchdog::Timeouts;
use crate::listen::{handshake, serve};
use crate::observe::metrics::{self, Level, Raised};

/// hyper's smallest read buffer.
const MIN_BUF_SIZE: u64 = 8192;

/// A gateway bound to its addresses, ready to serve.
#[derive(Debug)]
pub struct Server {
    gateway: Arc<Gateway>,
    http: Acceptor,
    /// The TLS listener, with `[server.tls]`.
    tls: Option<Acceptor>,
    admin: Acceptor,
    /// SIGHUP, caught from binding on: each one reloads.
    hangup: tokio::signal::unix::Signal,
    /// With `scheduler = "per-core"`, the listeners of every CPU but the first, which the
    /// runtime this server runs on serves.
    cores: Vec<per_core::Core>,
}

impl Server {
    /// Checks the open-file limit can hold the configured load (raising the soft limit if
    /// need be: [`files`]), binds the HTTP, TLS (with `[server.tls]`, on `tls` if given, else
    /// on its `listen`) and admin listeners, and catches SIGHUP (which reloads once the server runs): a SIGHUP
    /// that arrives before then must not kill the process.
    pub async fn bind(
        gateway: Gateway,
        listen: SocketAddr,
        admin: SocketAddr,
        tls: Option<SocketAddr>,
    ) -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let hangup = signal(SignalKind::hangup())?;
        let server = gateway.server();
        let workers = gateway.worker_count();
        let resident = gateway.runtime.config().max_resident.get().min(workers) as u64;
        files::ensure(files::Needed::of(&server, resident)).map_err(std::io::Error::other)?;
        let by_core = server.scheduler == Scheduler::PerCore;
        let reuse_port = server.reuse_port || by_core;
        let http = bind(listen, reuse_port)?;
        let tls =
            server.tls.map(|config| bind(tls.unwrap_or(config.listen), reuse_port)).transpose()?;
        let cores = match by_core {
            true => per_core::Core::bind_others(&http, tls.as_ref())?,
            false => Vec::new(),
        };
        let http = Acceptor::new(http, "http");
        let tls = tls.map(|listener| Acceptor::new(listener, "tls"));
        if !admin.ip().is_loopback() && !gateway.token.is_set() {
            tracing::warn!(
                %admin,
                "the admin listener is not on loopback and {} is not set: anyone who can reach \
                 it can reload the configuration",
                crate::config::token::TOKEN_ENV
            );
        }
        let admin = Acceptor::new(bind(admin, server.reuse_port)?, "admin");
        Ok(Self { gateway: Arc::new(gateway), http, tls, admin, hangup, cores })
    }

    /// The gateway this server serves: what `reload` is called on.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Where the HTTP listener is bound (useful after binding port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.http.local_addr()
    }

    /// Where the TLS listener is bound, with `[server.tls]`.
    pub fn tls_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.tls.as_ref().map(Acceptor::local_addr)
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
        let timeouts = Timeouts {
            handshake: server.handshake_timeout,
            header_read: server.header_read_timeout,
            idle: server.idle_timeout,
        };
        let builders = Builders::new(&server);
        let admin = tokio::spawn(admin::serve(
            self.admin,
            admin::Listener {
                draining: draining.clone(),
                gateway: self.gateway.clone(),
                timeouts,
                builder: builders.http1.clone(),
                connections: Arc::new(Semaphore::new(server.admin_max_connections)),
            },
        ));
        let hangups = tokio::spawn(reload_on_hangup(self.hangup, self.gateway.clone()));
        // Every connection holds a receiver: a value sent tells them all to drain, and
        // `closed()` says when the last one has ended.
        let (drain, drain_receiver) = tokio::sync::watch::channel(());
        let accept = Arc::new(Accept {
            gateway: self.gateway.clone(),
            builders,
            timeouts,
            connections: Arc::new(Semaphore::new(server.max_connections)),
            handshakes: Semaphore::new(server.tls.as_ref().map_or(1, |t| t.max_handshakes)),
            drain: drain_receiver,
            draining: draining.clone(),
            open: ["http", "tls"].map(|listener| {
                metrics::gauge("edgegate_connections_open", vec![("listener", listener.into())])
            }),
        });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let stopped_core = stopped.clone();
        let mut loops = tokio::task::JoinSet::new();
        loops.spawn(accept.clone().accept(self.http, false, stopped.clone()));
        if let Some(tls) = self.tls {
            loops.spawn(accept.clone().accept(tls, true, stopped));
        }
        let mut cores = per_core::Cores::start(self.cores, &accept, &stopped_core);
        drop(accept);
        shutdown.await;
        let _ = stop.send(true);
        // The loops end and close their listeners.
        while loops.join_next().await.is_some() {}
        cores.stopped_accepting().await;

        draining.store(true, Ordering::Relaxed);
        tracing::info!(timeout = ?server.shutdown_timeout, "shutting down: no longer accepting, draining in-flight requests");
        // Sending wakes every connection's receiver: each shuts down gracefully.
        let _ = drain.send(());
        match tokio::time::timeout(server.shutdown_timeout, drain.closed()).await {
            Ok(()) => tracing::info!("drained"),
            Err(_) => tracing::warn!("shutdown timeout: exiting with requests still in flight"),
        }
        cores.exit().await;
        admin.abort();
        hangups.abort();
    }
}

/// What every accepted connection needs, shared by the accept loops.
pub(crate) struct Accept {
    gateway: Arc<Gateway>,
    builders: Builders,
    timeouts: Timeouts,
    /// `max_connections` places, over both listeners.
    connections: Arc<Semaphore>,
    /// `server.tls.max_handshakes` places.
    handshakes: Semaphore,
    /// Cloned for each connection; see [`Server::run`].
    drain: tokio::sync::watch::Receiver<()>,
    /// Set before `drain` changes: HTTP/1.1 answers from then on carry `Connection: close`.
    draining: Arc<AtomicBool>,
    /// Connections open on the HTTP listener and on the TLS one.
    open: [Arc<Level>; 2],
}

impl Accept {
    /// Accepts on `acceptor` (TLS or not) until `stop` changes.
    async fn accept(
        self: Arc<Self>,
        mut acceptor: Acceptor,
        tls: bool,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            let permit = tokio::select! {
                permit = self.connections.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
                _ = stop.changed() => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = acceptor.accept() => accepted,
                _ = stop.changed() => break,
            };
            let accepted = std::time::Instant::now();
            let _ = stream.set_nodelay(true);
            let drain = self.drain.clone();
            let accept = self.clone();
            tokio::spawn(async move {
                let _open = Raised::new(&accept.open[usize::from(tls)]);
                if !tls {
                    let conn = ConnInfo { peer, tls: None };
                    accept.serve(stream, conn, accepted, drain, &accept.builders.auto).await;
                } else if let Some(config) = accept.gateway.tls() {
                    let deadline = tokio::time::Instant::now() + accept.timeouts.handshake;
                    let handshaken =
                        handshake::handshake(stream, config, &accept.handshakes, deadline).await;
                    if let Some((stream, info)) = handshaken {
                        // The protocol ALPN chose, not hyper-util's sniffing of the bytes.
                        let builder = match info.alpn {
                            "h2" => &accept.builders.h2,
                            _ => &accept.builders.http1,
                        };
                        let conn = ConnInfo { peer, tls: Some(info) };
                        accept.serve(stream, conn, accepted, drain, builder).await;
                    }
                }
                drop(permit);
            });
        }
    }

    /// Serves requests on one connection until the client closes, the watchdog closes it, or
    /// the gateway drains.
    async fn serve<S>(
        &self,
        io: S,
        conn: ConnInfo,
        accepted: std::time::Instant,
        drain: tokio::sync::watch::Receiver<()>,
        builder: &auto::Builder<TokioExecutor>,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let gateway = self.gateway.clone();
        let draining = self.draining.clone();
        let handler = move |request: Request<Incoming>| {
            let gateway = gateway.clone();
            // A request that arrives while the gateway drains is answered, and its HTTP/1.1
            // connection closed after it: the client reconnects to a process that stays.
            let close = request.version() < Version::HTTP_2 && draining.load(Ordering::Relaxed);
            async move {
                let mut response = gateway.handle(request, conn).await;
                if close {
                    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
                }
                response
            }
        };
        serve::serve(io, conn.peer, accepted, self.timeouts, builder, Some(drain), handler).await;
    }
}

/// hyper's connection builders, one set of `[server]` settings: `auto` sniffs HTTP/1.1 from
/// h2c on the plain port; behind TLS, ALPN has chosen, and `http1` or `h2` serves only that.
struct Builders {
    auto: auto::Builder<TokioExecutor>,
    http1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
}

impl Builders {
    fn new(server: &ServerConfig) -> Self {
        let auto = builder(server);
        Self { http1: auto.clone().http1_only(), h2: auto.clone().http2_only(), auto }
    }
}

/// A listening socket on `addr`; with `reuse_port`, one that other processes may bind too
/// (the kernel spreads new connections across them).
fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Reloads on each SIGHUP; the outcome is logged (and counted) by the reload.
async fn reload_on_hangup(mut hangup: tokio::signal::unix::Signal, gateway: Arc<Gateway>) {
    while hangup.recv().await.is_some() {
        tracing::info!("SIGHUP received: reloading");
        let _ = gateway.reload().await;
    }
}

/// hyper's connection settings from `[server]`: HTTP/1.1 and h2c on one port, sniffed.
fn builder(server: &ServerConfig) -> auto::Builder<TokioExecutor> {
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
    let keepalive = Some(server.h2_keepalive_interval).filter(|i| !i.is_zero());
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(server.max_header_bytes.bytes()).unwrap_or(u32::MAX))
        .keep_alive_interval(keepalive)
        .keep_alive_timeout(server.h2_keepalive_timeout)
        .max_concurrent_streams(server.h2_max_concurrent_streams)
        .initial_stream_window_size(server.h2_stream_window.bytes() as u32)
        .initial_connection_window_size(server.h2_connection_window.bytes() as u32);
    builder
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
