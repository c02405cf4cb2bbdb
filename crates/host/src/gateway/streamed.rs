//! A response body sent as it arrives: an upstream's, or a worker's that is still being
//! written (a component's answer past its buffer). The latter holds the instance slot, and
//! the worker's and its tenant's shares, that its guest still runs in, until the body ends or
//! is dropped. Either tells its request (super::told) when it ends: whole, cut, or dropped by
//! a client that went away, with the bytes it carried.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use edgegate_runtime::{Progress, StreamedBody};
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::BoxError;
use super::told::{Ended, Pending};
use crate::forward::upstream::UpstreamBody;
use crate::observe::metrics::{Level, Raised};

pin_project_lite::pin_project! {
    /// A streamed body: an upstream's answer, or a worker's with the places its guest holds
    /// until it ends.
    #[derive(Debug)]
    pub struct Streamed {
        #[pin]
        inner: Inner,
        teller: Teller,
    }

    impl PinnedDrop for Streamed {
        /// A body dropped at its end (hyper need not poll one that says it has ended, an empty
        /// one, a 304's) was whole; one dropped before it, by a client that went away.
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let whole = match this.inner.project() {
                InnerProj::Upstream { body } => body.is_end_stream(),
                InnerProj::Guest { body } => body.body.is_end_stream(),
            };
            this.teller.end(if whole { Ended::Whole } else { Ended::Dropped });
        }
    }
}

pin_project_lite::pin_project! {
    #[project = InnerProj]
    #[derive(Debug)]
    enum Inner {
        Upstream { #[pin] body: UpstreamBody },
        Guest { body: GuestBody },
    }
}

/// What a streamed body tells of its request when it ends: the bytes it carried, and how it
/// ended. Told at the end, or when the body is dropped.
#[derive(Debug, Default)]
struct Teller {
    pending: Option<Box<Pending>>,
    sent: u64,
    /// A guest's: what it used, and why its answer was cut.
    progress: Option<Arc<Progress>>,
}

impl Teller {
    fn end(&mut self, ended: Ended) {
        if let Some(pending) = self.pending.take() {
            pending.tell(self.sent, ended, self.progress.as_deref());
        }
    }
}

/// A worker's streamed answer, and the instance slot (and share places) its guest runs in.
pub struct GuestBody {
    body: StreamedBody,
    _held: Held,
}

impl std::fmt::Debug for GuestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestBody").finish_non_exhaustive()
    }
}

impl Streamed {
    /// An upstream's answer.
    pub(crate) fn upstream(body: UpstreamBody) -> Self {
        Self { inner: Inner::Upstream { body }, teller: Teller::default() }
    }

    /// A worker's answer, holding `held` until it ends; `progress` is its guest's.
    pub(super) fn guest(body: StreamedBody, held: Held, progress: Arc<Progress>) -> Self {
        let teller = Teller { pending: None, sent: 0, progress: Some(progress) };
        Self { inner: Inner::Guest { body: GuestBody { body, _held: held } }, teller }
    }

    /// Tells `pending` when the body ends.
    pub(super) fn tell_at_end(&mut self, pending: Pending) {
        self.teller.pending = Some(Box::new(pending));
    }
}

/// An instance slot and share places taken for a request, given back when dropped: the
/// permits' places are added back to their semaphores and the slots gauge lowered.
#[derive(Debug, Default)]
pub(super) struct Held {
    places: Vec<Arc<Semaphore>>,
    level: Option<Arc<Level>>,
}

impl Held {
    /// Keeps `slot` (its semaphore is `slots`, its gauge `in_use`) and `shares` (the
    /// worker's, its tenant's) past the permits' borrows.
    pub(super) fn keep<'a>(
        slot: (SemaphorePermit<'_>, Raised<'_>),
        slots: &Arc<Semaphore>,
        in_use: &Arc<Level>,
        shares: impl IntoIterator<Item = (SemaphorePermit<'a>, &'a Arc<Semaphore>)>,
    ) -> Self {
        let (permit, raised) = slot;
        permit.forget();
        std::mem::forget(raised);
        let mut places = vec![slots.clone()];
        for (permit, semaphore) in shares {
            permit.forget();
            places.push(semaphore.clone());
        }
        Self { places, level: Some(in_use.clone()) }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for semaphore in &self.places {
            semaphore.add_permits(1);
        }
        if let Some(level) = &self.level {
            level.add(-1);
        }
    }
}

impl Body for Streamed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        let (frame, at_end) = match this.inner.project() {
            InnerProj::Upstream { mut body } => {
                let frame = std::task::ready!(body.as_mut().poll_frame(cx));
                (frame, body.is_end_stream())
            }
            InnerProj::Guest { body } => {
                let frame = std::task::ready!(Pin::new(&mut body.body).poll_frame(cx));
                (frame, body.body.is_end_stream())
            }
        };
        let teller = this.teller;
        match &frame {
            Some(Ok(frame)) => {
                teller.sent += frame.data_ref().map_or(0, |data| data.len() as u64);
                // hyper stops polling a body that says it has ended.
                if at_end {
                    teller.end(Ended::Whole);
                }
            }
            Some(Err(_)) => teller.end(Ended::Failed),
            None => teller.end(Ended::Whole),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Upstream { body } => body.is_end_stream(),
            Inner::Guest { body } => body.body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Upstream { body } => body.size_hint(),
            Inner::Guest { body } => body.body.size_hint(),
        }
    }
}
