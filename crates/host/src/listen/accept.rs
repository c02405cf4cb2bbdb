//! Accepting connections on a listener without spinning when the process runs out of file
//! descriptors.
//!
//! `accept(2)` fails with `EMFILE` (the process's limit) or `ENFILE` (the system's) while the
//! pending connection stays in the kernel's queue, so retrying at once fails again at once: a
//! loop that does spins a core and floods the log. Here such a failure waits, 10 ms at first
//! and twice as long after each further one, up to 1 s, while descriptors are freed; one
//! warning is logged when it starts and one line when accepting works again. Every failure is
//! counted in `edgegate_accept_errors_total{listener,reason}`. Other failures (a connection
//! the client reset before it was accepted) concern that connection only: counted, and the
//! next is accepted at once.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// The first wait after running out of descriptors.
const FIRST: Duration = Duration::from_millis(10);
/// The longest wait.
const LONGEST: Duration = Duration::from_secs(1);

/// `EMFILE` and `ENFILE` (Linux, and the same on the BSDs and macOS).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// A listener and how long its next failure waits.
#[derive(Debug)]
pub(crate) struct Acceptor {
    listener: TcpListener,
    /// `listener` in the metric: `http`, `tls` or `admin`.
    name: &'static str,
    /// The wait after the next failure for lack of descriptors; zero while accepting works.
    backoff: Duration,
    /// Failures for lack of descriptors since accepting last worked.
    failures: u64,
}

impl Acceptor {
    pub(crate) fn new(listener: TcpListener, name: &'static str) -> Self {
        Self { listener, name, backoff: Duration::ZERO, failures: 0 }
    }

    /// The next connection.
    pub(crate) async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok(accepted) => {
                    if self.failures > 0 {
                        tracing::info!(
                            listener = self.name,
                            failures = self.failures,
                            "accepting connections again"
                        );
                    }
                    self.backoff = Duration::ZERO;
                    self.failures = 0;
                    return accepted;
                }
                Err(e) => self.failed(&e).await,
            }
        }
    }

    async fn failed(&mut self, e: &std::io::Error) {
        let reason = match e.raw_os_error() {
            Some(EMFILE) => "emfile",
            Some(ENFILE) => "enfile",
            _ => "other",
        };
        metrics::counter!("edgegate_accept_errors_total", "listener" => self.name, "reason" => reason)
            .increment(1);
        if reason == "other" {
            tracing::debug!(listener = self.name, "accept failed: {e}");
            return;
        }
        if self.failures == 0 {
            tracing::warn!(
                listener = self.name,
                "accept failed: {e}; waiting for file descriptors to be freed \
                 (raise the open-file limit, or lower server.max_connections)"
            );
        }
        self.failures += 1;
        self.backoff = (self.backoff * 2).clamp(FIRST, LONGEST);
        tokio::time::sleep(self.backoff).await;
    }

    /// Where the listener is bound.
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn running_out_of_descriptors_waits_longer_each_time_up_to_a_second() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut acceptor = Acceptor::new(listener, "test");
        let emfile = std::io::Error::from_raw_os_error(EMFILE);
        let mut waits = Vec::new();
        for _ in 0..9 {
            let started = tokio::time::Instant::now();
            acceptor.failed(&emfile).await;
            waits.push(started.elapsed().as_millis());
        }
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        // A connection's own failure does not wait.
        let started = tokio::time::Instant::now();
        acceptor.failed(&std::io::Error::from_raw_os_error(103)).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
