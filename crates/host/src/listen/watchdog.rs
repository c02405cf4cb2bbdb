//! One client connection's watchdog: it closes a connection that never becomes a request, or
//! stops being one, so silent sockets cannot hold `max_connections` slots.
//!
//! hyper bounds a request's headers once their first byte arrived (HTTP/1.1), but not the
//! wait for that byte, nor hyper-util's sniffing of the h2 preface, nor an h2 connection that
//! opens no stream or leaves a header block unfinished. The socket reader ([`Watched`])
//! follows the connection's first bytes and, for h2, its frame boundaries; the request path
//! counts what is in flight ([`InFlight`]); the [`Watchdog`] decides:
//!
//! ```text
//!  accept ─▶ Silent ─first byte─▶ Sniffing (part of the h2 preface)
//!              │                     ├─ not the preface ─▶ HTTP/1.1 (hyper: header_read_timeout)
//!              │                     └─ whole preface ─▶ Preface ─first frame (SETTINGS)─▶ H2
//!              └───── any of these past handshake_timeout from accept: closed
//!
//!  H2: HEADERS … CONTINUATION(END_HEADERS) open longer than header_read_timeout: closed
//!  any: no request in flight for idle_timeout ─▶ graceful shutdown (h1: close; h2: GOAWAY,
//!       then close), and closed if it still stands GRACE later
//!  any: the socket took no byte of a waiting write for idle_timeout: closed
//!
//!  draining (shutdown): h2, or a request in flight ─▶ graceful shutdown at once (GOAWAY; the
//!       request in flight finishes, then HTTP/1.1 closes)
//!  draining, HTTP/1.1 (or not yet known) with nothing in flight ─▶ graceful shutdown once it
//!       has had no request for DRAIN_LINGER; a request that comes first is answered with
//!       `Connection: close`
//! ```
//!
//! The linger is for connections the client is about to use: one accepted just before the
//! drain whose request is still on its way, or a keep-alive connection between two requests.
//! Closing those at once would reset a request the client had already sent.
//!
//! A request is in flight from the moment hyper hands it over until its response body is
//! sent or dropped. hyper's own h2 keep-alive PINGs (`h2_keepalive_interval`) close a
//! connection whose peer stops answering, streams open or not.
//!
//! Cost: the reader looks at bytes only until HTTP/1.1 is detected, and for h2 reads each
//! frame's 9-byte header; a request costs two atomic adds and a clock read.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a connection may stay open after the watchdog asked it to shut down gracefully
/// with nothing in flight: hyper closes it at once, so this is a backstop.
const GRACE: Duration = Duration::from_secs(1);

/// How long a draining HTTP/1.1 connection with nothing in flight is given to bring its next
/// request, counted from its last request's end (or from accept).
const DRAIN_LINGER: Duration = Duration::from_secs(1);

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADERS: u8 = 0x1;
const FRAME_CONTINUATION: u8 = 0x9;
const FLAG_END_HEADERS: u8 = 0x4;

/// The `[server]` timeouts the watchdog enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// From accept to the first byte (HTTP/1.1) or the preface and first frame (h2).
    pub(crate) handshake: Duration,
    /// An h2 header block, from its HEADERS frame to its END_HEADERS.
    pub(crate) header_read: Duration,
    /// With no request in flight, or with a write the client does not take.
    pub(crate) idle: Duration,
}

/// How far a connection got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    Silent = 0,
    Sniffing = 1,
    Http1 = 2,
    Preface = 3,
    H2 = 4,
}

impl Phase {
    fn from_u8(value: u8) -> Self {
        match value {
            1 => Self::Sniffing,
            2 => Self::Http1,
            3 => Self::Preface,
            4 => Self::H2,
            _ => Self::Silent,
        }
    }

    fn handshaken(self) -> bool {
        matches!(self, Self::Http1 | Self::H2)
    }
}

/// What the reader and the request path tell the watchdog. Times are nanoseconds since
/// accept.
#[derive(Debug)]
pub(crate) struct ConnState {
    accepted: Instant,
    phase: AtomicU8,
    /// When the open h2 header block began, plus one; 0 when none is open.
    header_block: AtomicU64,
    in_flight: AtomicUsize,
    /// When the last request in flight ended.
    idle_since: AtomicU64,
    /// When the socket last refused a write that is still waiting, plus one; 0 when writes go
    /// through.
    write_blocked: AtomicU64,
}

impl ConnState {
    /// A connection accepted now.
    #[cfg(test)]
    pub(crate) fn new() -> Arc<Self> {
        Self::accepted(Instant::now())
    }

    /// A connection accepted at `accepted` (before its TLS handshake, on the TLS listener).
    pub(crate) fn accepted(accepted: Instant) -> Arc<Self> {
        Arc::new(Self {
            accepted,
            phase: AtomicU8::new(Phase::Silent as u8),
            header_block: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            write_blocked: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        self.accepted.elapsed().as_nanos() as u64
    }

    fn at(&self, nanos: u64) -> Instant {
        self.accepted + Duration::from_nanos(nanos)
    }

    fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Relaxed))
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Notes whether a write went through: the first refusal starts the stall, any progress
    /// ends it.
    fn wrote<T>(&self, poll: &Poll<std::io::Result<T>>) {
        match poll {
            Poll::Pending => {
                if self.write_blocked.load(Ordering::Relaxed) == 0 {
                    self.write_blocked.store(self.now() + 1, Ordering::Relaxed);
                }
            }
            Poll::Ready(_) => {
                if self.write_blocked.load(Ordering::Relaxed) != 0 {
                    self.write_blocked.store(0, Ordering::Relaxed);
                }
            }
        }
    }
}

/// A request in flight on its connection, until dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<ConnState>);

impl InFlight {
    /// Counts a request that hyper just handed over.
    pub(crate) fn enter(state: &Arc<ConnState>) -> Self {
        state.in_flight.fetch_add(1, Ordering::Relaxed);
        Self(state.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.idle_since.store(self.0.now(), Ordering::Relaxed);
        }
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request in flight until it is sent or dropped.
    #[derive(Debug)]
    pub(crate) struct Tracked<B> {
        #[pin]
        inner: B,
        in_flight: InFlight,
    }
}

impl<B> Tracked<B> {
    pub(crate) fn new(inner: B, in_flight: InFlight) -> Self {
        Self { inner, in_flight }
    }
}

impl<B: Body> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Where the reader is in the byte stream.
#[derive(Debug)]
enum Sniff {
    /// This many bytes of the h2 preface seen, all matching.
    Preface(usize),
    /// h2 frames: `have` bytes of the next frame header in `head`, or `payload` bytes of the
    /// current frame still to come.
    Frames { head: [u8; 9], have: usize, payload: u32, ends_block: bool },
    /// HTTP/1.1: nothing more to follow.
    Done,
}

pin_project_lite::pin_project! {
    /// A client socket whose reads tell the watchdog how far the connection got.
    #[derive(Debug)]
    pub(crate) struct Watched<S> {
        #[pin]
        inner: S,
        state: Arc<ConnState>,
        sniff: Sniff,
    }
}

impl<S> Watched<S> {
    pub(crate) fn new(inner: S, state: Arc<ConnState>) -> Self {
        Self { inner, state, sniff: Sniff::Preface(0) }
    }
}

impl Sniff {
    /// Follows `bytes`, the next ones read.
    fn follow(&mut self, mut bytes: &[u8], state: &ConnState) {
        while !bytes.is_empty() {
            match self {
                Self::Done => return,
                Self::Preface(seen) => {
                    let take = bytes.len().min(PREFACE.len() - *seen);
                    if bytes[..take] != PREFACE[*seen..*seen + take] {
                        state.set_phase(Phase::Http1);
                        *self = Self::Done;
                        return;
                    }
                    *seen += take;
                    bytes = &bytes[take..];
                    if *seen < PREFACE.len() {
                        state.set_phase(Phase::Sniffing);
                        return;
                    }
                    state.set_phase(Phase::Preface);
                    *self = Self::Frames { head: [0; 9], have: 0, payload: 0, ends_block: false };
                }
                Self::Frames { payload, ends_block, .. } if *payload > 0 => {
                    let take = bytes.len().min(*payload as usize);
                    *payload -= take as u32;
                    bytes = &bytes[take..];
                    if *payload == 0 && *ends_block {
                        state.header_block.store(0, Ordering::Relaxed);
                    }
                }
                Self::Frames { head, have, payload, ends_block } => {
                    let take = bytes.len().min(head.len() - *have);
                    head[*have..*have + take].copy_from_slice(&bytes[..take]);
                    *have += take;
                    bytes = &bytes[take..];
                    if *have < head.len() {
                        return;
                    }
                    *have = 0;
                    state.set_phase(Phase::H2);
                    *payload = u32::from_be_bytes([0, head[0], head[1], head[2]]);
                    let kind = head[3];
                    *ends_block = false;
                    if kind == FRAME_HEADERS || kind == FRAME_CONTINUATION {
                        if state.header_block.load(Ordering::Relaxed) == 0 {
                            state.header_block.store(state.now() + 1, Ordering::Relaxed);
                        }
                        *ends_block = head[4] & FLAG_END_HEADERS != 0;
                        if *payload == 0 && *ends_block {
                            state.header_block.store(0, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
    }
}

impl<S: AsyncRead> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let poll = this.inner.poll_read(cx, buf);
        if !matches!(this.sniff, Sniff::Done) && matches!(poll, Poll::Ready(Ok(()))) {
            this.sniff.follow(&buf.filled()[before..], this.state);
        }
        poll
    }
}

impl<S: AsyncWrite> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.project();
        let poll = this.inner.poll_write(cx, buf);
        this.state.wrote(&poll);
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.project();
        let poll = this.inner.poll_write_vectored(cx, bufs);
        this.state.wrote(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}

/// What the watchdog wants done with its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Drop it now: it never finished its handshake, an h2 header block stalled, or the client
    /// stopped taking its response. The label is the `reason` of
    /// `edgegate_connections_closed_total`.
    Close(&'static str),
    /// Shut it down gracefully: nothing is in flight, or the gateway drains.
    Shutdown(&'static str),
}

/// Watches one connection; see the module documentation.
#[derive(Debug)]
pub(crate) struct Watchdog {
    state: Arc<ConnState>,
    timeouts: Timeouts,
    shut_down_at: Option<Instant>,
    /// When the gateway began to drain, if it has.
    drain_from: Option<Instant>,
}

/// The watchdog's verdict at one moment.
enum Verdict {
    Due(Action),
    Wait(Instant),
}

impl Watchdog {
    pub(crate) fn new(state: Arc<ConnState>, timeouts: Timeouts) -> Self {
        Self { state, timeouts, shut_down_at: None, drain_from: None }
    }

    /// The gateway drains: the connection is shut down gracefully, at once or after the
    /// linger (see the module documentation).
    pub(crate) fn drain(&mut self) {
        self.drain_from.get_or_insert_with(Instant::now);
    }

    /// When a draining connection is shut down.
    fn drain_deadline(&self, from: Instant) -> Instant {
        let state = &self.state;
        if matches!(state.phase(), Phase::Preface | Phase::H2)
            || state.in_flight.load(Ordering::Relaxed) > 0
        {
            return from;
        }
        state.at(state.idle_since.load(Ordering::Relaxed)) + DRAIN_LINGER
    }

    /// Waits until something must be done, and says what.
    pub(crate) async fn next(&mut self) -> Action {
        loop {
            match self.verdict(Instant::now()) {
                Verdict::Due(action) => {
                    // The backstop after an idle shutdown was counted by the shutdown.
                    if self.shut_down_at.is_none() || matches!(action, Action::Shutdown(_)) {
                        metrics::counter!("edgegate_connections_closed_total", "reason" => action.reason())
                            .increment(1);
                    }
                    return action;
                }
                Verdict::Wait(until) => tokio::time::sleep_until(until.into()).await,
            }
        }
    }

    fn verdict(&mut self, now: Instant) -> Verdict {
        let state = &self.state;
        // Nothing wakes the watchdog early: it looks again at the latest one idle period
        // later, and one header timeout later while the connection may be h2. A request that
        // ends, a header block that opens or a write that stalls after this look has its
        // deadline after the next look, so every deadline is still met on time.
        let mut next = now + self.timeouts.idle;
        if state.phase() != Phase::Http1 {
            next = next.min(now + self.timeouts.header_read);
        }
        if let (Some(from), None) = (self.drain_from, self.shut_down_at) {
            let deadline = self.drain_deadline(from);
            if now >= deadline {
                self.shut_down_at = Some(now);
                return Verdict::Due(Action::Shutdown("drain"));
            }
            next = next.min(deadline);
        }
        if !state.phase().handshaken() {
            let deadline = state.accepted + self.timeouts.handshake;
            if now >= deadline {
                return Verdict::Due(Action::Close("handshake_timeout"));
            }
            return Verdict::Wait(deadline.min(next));
        }
        // An h2 header block left open; a client that takes no byte of its response, which
        // holds the connection (and maybe an upstream's) for nothing.
        for (since, timeout, reason) in [
            (&state.header_block, self.timeouts.header_read, "header_timeout"),
            (&state.write_blocked, self.timeouts.idle, "write_stalled"),
        ] {
            let since = since.load(Ordering::Relaxed);
            if since == 0 {
                continue;
            }
            let deadline = state.at(since - 1) + timeout;
            if now >= deadline {
                return Verdict::Due(Action::Close(reason));
            }
            next = next.min(deadline);
        }
        if state.in_flight.load(Ordering::Relaxed) == 0 {
            match self.shut_down_at {
                // Output still waiting for the socket (the tail of the last response) is
                // bounded by the write-stall rule, not cut by the backstop.
                Some(_) if state.write_blocked.load(Ordering::Relaxed) != 0 => {}
                Some(at) if now >= at + GRACE => {
                    return Verdict::Due(Action::Close("idle_timeout"));
                }
                Some(at) => next = next.min(at + GRACE),
                None => {
                    let deadline =
                        state.at(state.idle_since.load(Ordering::Relaxed)) + self.timeouts.idle;
                    if now >= deadline {
                        self.shut_down_at = Some(now);
                        return Verdict::Due(Action::Shutdown("idle_timeout"));
                    }
                    next = next.min(deadline);
                }
            }
        }
        Verdict::Wait(next)
    }
}

impl Action {
    fn reason(self) -> &'static str {
        match self {
            Self::Close(reason) | Self::Shutdown(reason) => reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts() -> Timeouts {
        Timeouts {
            handshake: Duration::from_secs(10),
            header_read: Duration::from_secs(5),
            idle: Duration::from_secs(60),
        }
    }

    fn feed(chunks: &[&[u8]]) -> Arc<ConnState> {
        let state = ConnState::new();
        let mut sniff = Sniff::Preface(0);
        for chunk in chunks {
            sniff.follow(chunk, &state);
        }
        state
    }

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let mut out = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 1];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn the_first_bytes_tell_http1_from_h2() {
        assert_eq!(feed(&[]).phase(), Phase::Silent);
        assert_eq!(feed(&[b"GET / HTTP/1.1\r\n"]).phase(), Phase::Http1);
        assert_eq!(feed(&[b"PRI * HTTP/2.0\r\n"]).phase(), Phase::Sniffing);
        assert_eq!(feed(&[b"PRI * HTTP/2.0\r\n", b"X"]).phase(), Phase::Http1);
        assert_eq!(feed(&[PREFACE]).phase(), Phase::Preface, "no SETTINGS yet");
        let settings = frame(0x4, 0, &[]);
        assert_eq!(feed(&[PREFACE, &settings[..5], &settings[5..]]).phase(), Phase::H2);
    }

    #[test]
    fn an_h2_header_block_is_open_from_headers_to_end_headers() {
        let settings = frame(0x4, 0, &[0; 6]);
        let headers = frame(FRAME_HEADERS, 0, b"abc");
        let continuation = frame(FRAME_CONTINUATION, FLAG_END_HEADERS, b"de");
        let open = feed(&[PREFACE, &settings, &headers]);
        assert_ne!(open.header_block.load(Ordering::Relaxed), 0);
        let closed =
            feed(&[PREFACE, &settings, &headers, &continuation[..10], &continuation[10..]]);
        assert_eq!(closed.header_block.load(Ordering::Relaxed), 0);
        // A whole block in one frame, split anywhere, and a DATA frame of any size after it.
        let one = frame(FRAME_HEADERS, FLAG_END_HEADERS | 0x1, b"xyz");
        let data = frame(0x0, 0x1, &[7; 300]);
        let stream: Vec<u8> = [&PREFACE[..], &settings, &one, &data].concat();
        for split in 0..stream.len() {
            let state = feed(&[&stream[..split], &stream[split..]]);
            assert_eq!(state.header_block.load(Ordering::Relaxed), 0, "split at {split}");
            assert_eq!(state.phase(), Phase::H2, "split at {split}");
        }
        // A HEADERS frame whose payload is still arriving is an open block.
        let trickle = feed(&[PREFACE, &settings, &one[..11]]);
        assert_ne!(trickle.header_block.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_watchdog_closes_what_never_handshakes_and_shuts_down_what_idles() {
        let state = feed(&[]);
        let mut dog = Watchdog::new(state.clone(), timeouts());
        let start = state.accepted;
        // The next look comes before any deadline that starts after this one could pass: a
        // header timeout (5 s) later, not only at the handshake deadline (10 s).
        let secs = Duration::from_secs;
        assert!(matches!(dog.verdict(start), Verdict::Wait(t) if t == start + secs(5)));
        assert!(matches!(dog.verdict(start + secs(9)), Verdict::Wait(t) if t == start + secs(10)));
        assert!(matches!(
            dog.verdict(start + Duration::from_secs(10)),
            Verdict::Due(Action::Close("handshake_timeout"))
        ));

        let state = feed(&[b"GET / HTTP/1.1\r\n"]);
        let mut dog = Watchdog::new(state.clone(), timeouts());
        let start = state.accepted;
        let request = InFlight::enter(&state);
        assert!(matches!(dog.verdict(start + Duration::from_secs(3600)), Verdict::Wait(_)), "busy");
        drop(request);
        let idle = state.at(state.idle_since.load(Ordering::Relaxed));
        assert!(matches!(dog.verdict(idle + Duration::from_secs(59)), Verdict::Wait(_)));
        assert!(matches!(
            dog.verdict(idle + Duration::from_secs(60)),
            Verdict::Due(Action::Shutdown("idle_timeout"))
        ));
        let later = idle + Duration::from_secs(60) + GRACE;
        // The socket refused the tail of the last response 30 s before: it is going out.
        let refused = later - Duration::from_secs(30) - state.accepted;
        state.write_blocked.store(refused.as_nanos() as u64 + 1, Ordering::Relaxed);
        assert!(matches!(dog.verdict(later), Verdict::Wait(_)), "the tail is still going out");
        state.wrote(&Poll::Ready(Ok(1usize)));
        assert!(matches!(dog.verdict(later), Verdict::Due(Action::Close("idle_timeout"))));
    }

    #[test]
    fn a_request_that_ends_between_two_looks_is_timed_from_its_end() {
        let state = feed(&[b"GET / HTTP/1.1\r\n"]);
        let mut dog = Watchdog::new(state.clone(), timeouts());
        let busy = InFlight::enter(&state);
        let first = Instant::now();
        let idle = timeouts().idle;
        assert!(matches!(dog.verdict(first), Verdict::Wait(t) if t == first + idle));
        std::thread::sleep(Duration::from_millis(2));
        drop(busy);
        let ended = state.at(state.idle_since.load(Ordering::Relaxed));
        assert!(matches!(dog.verdict(first + idle), Verdict::Wait(t) if t == ended + idle));
        assert!(matches!(dog.verdict(ended + idle), Verdict::Due(Action::Shutdown(_))));
    }

    #[test]
    fn a_client_that_takes_no_byte_for_an_idle_period_is_closed() {
        let state = feed(&[b"GET / HTTP/1.1\r\n"]);
        let _busy = InFlight::enter(&state);
        let mut dog = Watchdog::new(state.clone(), timeouts());
        state.wrote::<usize>(&Poll::Pending);
        let stalled = state.at(state.write_blocked.load(Ordering::Relaxed) - 1);
        state.wrote::<usize>(&Poll::Pending);
        assert_eq!(state.at(state.write_blocked.load(Ordering::Relaxed) - 1), stalled, "kept");
        assert!(matches!(dog.verdict(stalled + Duration::from_secs(59)), Verdict::Wait(_)));
        assert!(matches!(
            dog.verdict(stalled + Duration::from_secs(60)),
            Verdict::Due(Action::Close("write_stalled"))
        ));
        state.wrote(&Poll::Ready(Ok(1usize)));
        assert!(
            matches!(dog.verdict(stalled + Duration::from_secs(60)), Verdict::Wait(_)),
            "progress"
        );
    }

    #[test]
    fn a_stalled_h2_header_block_is_closed_even_while_a_request_runs() {
        let settings = frame(0x4, 0, &[]);
        let state = feed(&[PREFACE, &settings, &frame(FRAME_HEADERS, 0, b"a")]);
        let _busy = InFlight::enter(&state);
        let mut dog = Watchdog::new(state.clone(), timeouts());
        let start = state.accepted;
        assert!(matches!(dog.verdict(start + Duration::from_secs(4)), Verdict::Wait(_)));
        assert!(matches!(
            dog.verdict(start + Duration::from_secs(6)),
            Verdict::Due(Action::Close("header_timeout"))
        ));
    }

    #[test]
    fn a_drain_shuts_down_busy_and_h2_connections_at_once_and_idle_http1_after_the_linger() {
        let drained = |state: &Arc<ConnState>, now: Instant| {
            let mut dog = Watchdog::new(state.clone(), timeouts());
            dog.drain_from = Some(now);
            dog.verdict(now)
        };
        let is_drain =
            |verdict: Verdict| matches!(verdict, Verdict::Due(Action::Shutdown("drain")));

        let settings = frame(0x4, 0, &[]);
        let h2 = feed(&[PREFACE, &settings]);
        assert!(is_drain(drained(&h2, h2.accepted)), "h2: GOAWAY at once");

        let busy = feed(&[b"GET / HTTP/1.1\r\n"]);
        let request = InFlight::enter(&busy);
        assert!(is_drain(drained(&busy, busy.accepted)), "in flight: finish it, then close");

        // A connection whose request is still on its way, and one between two requests, get
        // the linger; one idle for longer is shut down at once.
        let fresh = feed(&[]);
        let start = fresh.accepted;
        assert!(matches!(drained(&fresh, start), Verdict::Wait(t) if t == start + DRAIN_LINGER));
        let mut dog = Watchdog::new(fresh.clone(), timeouts());
        dog.drain();
        assert!(is_drain(dog.verdict(start + DRAIN_LINGER)));
        assert!(!is_drain(dog.verdict(start + DRAIN_LINGER)), "once");

        drop(request);
        let ended = busy.at(busy.idle_since.load(Ordering::Relaxed));
        assert!(matches!(drained(&busy, ended), Verdict::Wait(t) if t == ended + DRAIN_LINGER));
        assert!(is_drain(drained(&busy, ended + DRAIN_LINGER)));
    }
}
