//! Shadow traffic: a copy of a split route's request sent to another target after the
//! primary has answered, the two answers compared, the client never waiting for it.
//!
//! ```text
//!  primary answers ──▶ client (its body hashed as it streams: Digest)
//!        └─ copy (x-edgegate-shadow: 1) ──▶ shadow target, within timeout ─▶ status,
//!                                           chosen headers, body hash ─▶ compare ─▶ count
//! ```
//!
//! Only the configured methods (GET and HEAD by default) are shadowed; a body over the cap,
//! or no free shadow place (`concurrency`), or no free instance slot, skips it. A shadow that
//! fails or hangs is counted and dropped: the client's answer and its latency are the
//! primary's alone.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::config::ShadowConfig;
use crate::observe::metrics::{CountsBy, LabelValue};

/// The header a shadow copy carries (`1`), so its target can tell it from a real request.
/// The gateway removes it from every client request: only the gateway sets it.
pub(crate) const MARKER: &str = "x-edgegate-shadow";

/// How many differences are logged per route and minute.
const LOGGED_PER_MINUTE: u64 = 5;

/// What a shadow found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Match,
    StatusDiff,
    HeaderDiff,
    BodyDiff,
    ShadowError,
    Skipped,
}

impl LabelValue for Outcome {
    const LABEL: &'static str = "outcome";
    const ALL: &'static [Self] = &[
        Self::Match,
        Self::StatusDiff,
        Self::HeaderDiff,
        Self::BodyDiff,
        Self::ShadowError,
        Self::Skipped,
    ];

    fn value(self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::StatusDiff => "status_diff",
            Self::HeaderDiff => "header_diff",
            Self::BodyDiff => "body_diff",
            Self::ShadowError => "shadow_error",
            Self::Skipped => "skipped",
        }
    }
}

/// A split route's shadow settings and counters.
#[derive(Debug)]
pub(crate) struct Shadow {
    route: String,
    methods: Vec<Method>,
    max_body: u64,
    pub(crate) timeout: Duration,
    compare: Vec<HeaderName>,
    places: Arc<Semaphore>,
    outcomes: CountsBy<Outcome>,
    /// The minute (since the epoch) differences were last logged in, and how many.
    logged: AtomicU64,
}

/// An answer as the comparison sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) status: u16,
    /// The compared headers' values, in the configured order.
    pub(crate) headers: Vec<Option<HeaderValue>>,
    /// SHA-256 of the body.
    pub(crate) body: [u8; 32],
}

impl Shadow {
    pub(crate) fn new(config: &ShadowConfig, route: &str) -> Self {
        let outcomes = CountsBy::new("edgegate_shadow_total", &[("route", route.to_owned())]);
        Self {
            route: route.to_owned(),
            // Validated as methods and header names.
            methods: config
                .methods
                .iter()
                .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
                .collect(),
            max_body: config.max_body.bytes(),
            timeout: config.timeout,
            compare: config
                .compare_headers
                .iter()
                .filter_map(|h| HeaderName::from_bytes(h.as_bytes()).ok())
                .collect(),
            places: Arc::new(Semaphore::new(config.concurrency)),
            outcomes,
            logged: AtomicU64::new(0),
        }
    }

    /// A place for a shadow of a `method` request with a body of `body` bytes: `None` when
    /// the method is not shadowed, or when it is skipped (counted) for its body or for want
    /// of a place.
    pub(crate) fn place(&self, method: &Method, body: usize) -> Option<OwnedSemaphorePermit> {
        if !self.methods.contains(method) {
            return None;
        }
        let place = (body as u64 <= self.max_body)
            .then(|| self.places.clone().try_acquire_owned().ok())
            .flatten();
        if place.is_none() {
            self.count(Outcome::Skipped);
        }
        place
    }

    pub(crate) fn count(&self, outcome: Outcome) {
        self.outcomes.increment(outcome);
    }

    /// What an answer shows of `status`, `headers` and the body digest.
    pub(crate) fn seen(&self, status: u16, headers: &HeaderMap, body: [u8; 32]) -> Seen {
        Seen {
            status,
            headers: self.compare.iter().map(|h| headers.get(h).cloned()).collect(),
            body,
        }
    }

    /// Compares the two answers, counts the outcome, and logs the first differences of each
    /// minute with the request id.
    pub(crate) fn judge(&self, primary: &Seen, shadow: &Seen, id: &str) -> Outcome {
        let outcome = if primary.status != shadow.status {
            Outcome::StatusDiff
        } else if primary.headers != shadow.headers {
            Outcome::HeaderDiff
        } else if primary.body != shadow.body {
            Outcome::BodyDiff
        } else {
            Outcome::Match
        };
        self.count(outcome);
        if outcome != Outcome::Match && self.may_log() {
            tracing::warn!(
                route = %self.route,
                request_id = id,
                outcome = outcome.value(),
                primary_status = primary.status,
                shadow_status = shadow.status,
                "shadow differs from the primary"
            );
        }
        outcome
    }

    /// Whether another difference may be logged this minute.
    fn may_log(&self) -> bool {
        let minute = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 60);
        // The high bits hold the minute, the low 8 the count within it.
        let now = self.logged.load(Ordering::Relaxed);
        let (at, count) = (now >> 8, now & 0xff);
        let next = if at == minute { (minute << 8) | (count + 1) } else { (minute << 8) | 1 };
        (at != minute || count < LOGGED_PER_MINUTE)
            && self.logged.compare_exchange(now, next, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }
}

/// The SHA-256 of a whole body, read within `cap` bytes; `None` when it failed or was over.
pub(crate) async fn digest_of<B>(body: B, cap: usize) -> Option<[u8; 32]>
where
    B: Body<Data = Bytes>,
{
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut body = std::pin::pin!(body);
    let mut read = 0usize;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.ok()?.into_data() {
            read += data.len();
            if read > cap {
                return None;
            }
            context.update(&data);
        }
    }
    context.finish().as_ref().try_into().ok()
}

pin_project_lite::pin_project! {
    /// A response body on its way to the client which, when a shadow compares it, hashes
    /// what passes through and sends the digest when it ends (nothing, if it fails or is
    /// dropped first). Untapped, it passes frames through untouched.
    pub struct Digested<B> {
        #[pin]
        inner: B,
        context: Option<ring::digest::Context>,
        done: Option<oneshot::Sender<[u8; 32]>>,
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for Digested<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digested").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<B> Digested<B> {
    /// `inner`, untapped.
    pub(crate) fn new(inner: B) -> Self {
        Self { inner, context: None, done: None }
    }

    /// The body it passes on.
    pub(crate) fn get_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// Hashes from now on, and sends the digest to `done` at the end.
    pub(crate) fn tap(&mut self, done: oneshot::Sender<[u8; 32]>) {
        self.context = Some(ring::digest::Context::new(&ring::digest::SHA256));
        self.done = Some(done);
    }
}

impl<B: Body<Data = Bytes>> Body for Digested<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        let frame = std::task::ready!(this.inner.as_mut().poll_frame(cx));
        if this.context.is_none() {
            return Poll::Ready(frame);
        }
        match &frame {
            Some(Ok(frame)) => {
                if let (Some(data), Some(context)) = (frame.data_ref(), this.context.as_mut()) {
                    context.update(data);
                }
            }
            Some(Err(_)) => *this.done = None,
            None => {}
        }
        // hyper stops polling a body that says it has ended.
        if (frame.is_none() || this.inner.is_end_stream())
            && let (Some(context), Some(done)) = (this.context.take(), this.done.take())
        {
            let _ = done.send(context.finish().as_ref().try_into().unwrap_or([0; 32]));
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
