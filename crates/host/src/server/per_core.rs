//! `scheduler = "per-core"`: a single-threaded runtime per CPU, each accepting on a listener
//! of its own and running the connections it accepted to their end.
//!
//! ```text
//!  CPU 0: the process's runtime (one worker)   admin, reloads, and listeners 0
//!  CPU 1: thread edgegate-core-1               listeners 1 (SO_REUSEPORT, same ports)
//!  …                                           the kernel spreads new connections
//! ```
//!
//! With work stealing, an idle worker thread takes tasks from a busy one, so every request
//! can wake a parked thread and hop between them; here a connection never leaves its
//! thread. Shutdown is the work-stealing one, per thread: every thread stops accepting
//! before the gateway drains, and keeps running its connections until the drain ends.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use super::Accept;
use crate::listen::accept::Acceptor;

/// One more CPU's listeners: the HTTP one, and the TLS one with `[server.tls]`.
#[derive(Debug)]
pub(super) struct Core {
    http: std::net::TcpListener,
    tls: Option<std::net::TcpListener>,
}

impl Core {
    /// A listener on each of `http`'s and `tls`'s addresses (bound with `SO_REUSEPORT`) for
    /// every CPU the process may run on but the first.
    pub(super) fn bind_others(
        http: &TcpListener,
        tls: Option<&TcpListener>,
    ) -> std::io::Result<Vec<Self>> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let again = |listener: &TcpListener| {
            super::bind(listener.local_addr()?, true).and_then(TcpListener::into_std)
        };
        (1..cpus)
            .map(|_| Ok(Self { http: again(http)?, tls: tls.map(again).transpose()? }))
            .collect()
    }

    /// Runs on its own thread: accepts until `stop` changes, says so on `stopped`, then
    /// runs its connections until `exit` turns true.
    fn run(
        self,
        accept: Arc<Accept>,
        stop: watch::Receiver<bool>,
        stopped: oneshot::Sender<()>,
        mut exit: watch::Receiver<bool>,
    ) {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => {
                tracing::error!(error = %e, "starting a per-core runtime: this CPU does not serve");
                return;
            }
        };
        runtime.block_on(async move {
            let mut loops = tokio::task::JoinSet::new();
            let listeners = std::iter::once((self.http, false)).chain(self.tls.map(|l| (l, true)));
            for (listener, tls) in listeners {
                match TcpListener::from_std(listener) {
                    Ok(listener) => {
                        let name = if tls { "tls" } else { "http" };
                        let acceptor = Acceptor::new(listener, name);
                        loops.spawn(accept.clone().accept(acceptor, tls, stop.clone()));
                    }
                    Err(e) => tracing::error!(error = %e, "a per-core listener: not served"),
                }
            }
            // Only the connections may hold it now: the drain waits for them alone.
            drop(accept);
            while loops.join_next().await.is_some() {}
            let _ = stopped.send(());
            let _ = exit.wait_for(|exit| *exit).await;
        });
    }
}

/// The per-core threads of a running server.
pub(super) struct Cores {
    threads: Vec<std::thread::JoinHandle<()>>,
    stopped: Vec<oneshot::Receiver<()>>,
    exit: watch::Sender<bool>,
}

impl Cores {
    /// A thread for each of `cores`, serving with `accept` until `stop` changes.
    pub(super) fn start(
        cores: Vec<Core>,
        accept: &Arc<Accept>,
        stop: &watch::Receiver<bool>,
    ) -> Self {
        let (exit, exiting) = watch::channel(false);
        let mut threads = Vec::new();
        let mut stopped = Vec::new();
        for (n, core) in (1..).zip(cores) {
            let (says, heard) = oneshot::channel();
            let (accept, stop, exiting) = (accept.clone(), stop.clone(), exiting.clone());
            let thread = std::thread::Builder::new()
                .name(format!("edgegate-core-{n}"))
                .spawn(move || core.run(accept, stop, says, exiting));
            match thread {
                Ok(thread) => {
                    threads.push(thread);
                    stopped.push(heard);
                }
                Err(e) => tracing::error!(error = %e, core = n, "starting a per-core thread"),
            }
        }
        Self { threads, stopped, exit }
    }

    /// Once every thread has stopped accepting.
    pub(super) async fn stopped_accepting(&mut self) {
        for heard in self.stopped.drain(..) {
            let _ = heard.await;
        }
    }

    /// Ends every thread, and the connections still on it, and waits for them.
    pub(super) async fn exit(self) {
        let _ = self.exit.send(true);
        let threads = self.threads;
        let _ = tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
        })
        .await;
    }
}
