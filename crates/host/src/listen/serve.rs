//! Serving one accepted connection under its watchdog ([`crate::listen::watchdog`]): the requests
//! hyper reads are handed to a handler, each counted in flight until its response is sent,
//! and the connection ends when the client closes, the watchdog closes it, or (for the
//! gateway's listeners) the drain has shut it down. The gateway's listeners and the admin
//! listener both serve through here, so both have the same first-byte, header and idle
//! timeouts.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use crate::listen::watchdog::{Action, ConnState, InFlight, Timeouts, Tracked, Watchdog, Watched};

/// Serves `io`, accepted at `accepted`, with `builder`, answering each request with
/// `handler`, until the connection ends. A value sent on `drain` shuts the connection down
/// gracefully (see [`Watchdog::drain`]).
pub(crate) async fn serve<I, H, F, B>(
    io: I,
    peer: SocketAddr,
    accepted: std::time::Instant,
    timeouts: Timeouts,
    builder: &auto::Builder<TokioExecutor>,
    mut drain: Option<watch::Receiver<()>>,
    handler: H,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let state = ConnState::accepted(accepted);
    let mut watchdog = Watchdog::new(state.clone(), timeouts);
    let io = Watched::new(io, state.clone());
    let service = service_fn(move |request: Request<Incoming>| {
        let in_flight = Some(InFlight::enter(&state));
        Answer { answer: handler(request), in_flight }
    });
    let connection = builder.serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    let mut draining = drain.is_none();
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            action = watchdog.next() => match action {
                Action::Close(reason) => {
                    tracing::debug!(%peer, reason, "connection closed");
                    return;
                }
                Action::Shutdown(reason) => {
                    tracing::debug!(%peer, reason, "connection shutting down");
                    connection.as_mut().graceful_shutdown();
                }
            },
            changed = async { drain.as_mut().expect("not yet draining").changed().await }, if !draining => {
                draining = true;
                if changed.is_ok() {
                    watchdog.drain();
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer, its body counted in flight until it is sent. A struct and not an
    /// `async` block, which would hold the handler's future twice (as what it captured and
    /// as what it awaits): kilobytes more for every move of a request's future.
    struct Answer<F> {
        #[pin]
        answer: F,
        in_flight: Option<InFlight>,
    }
}

impl<F, B> Future for Answer<F>
where
    F: Future<Output = Response<B>>,
{
    type Output = Result<Response<Tracked<B>>, std::convert::Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.answer.poll(cx));
        // Taken once: hyper never polls an answer again after it is ready.
        let Some(in_flight) = this.in_flight.take() else { return Poll::Pending };
        Poll::Ready(Ok(response.map(|body| Tracked::new(body, in_flight))))
    }
}
