//! A response body sent as it arrives: an upstream's, or a worker's that is still being
//! written (a component's answer past its buffer). The latter holds the instance slot, and
//! the worker's share, that its guest still runs in, until the body ends or is dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use edgegate_runtime::StreamedBody;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::BoxError;
use crate::forward::upstream::UpstreamBody;
use crate::observe::metrics::{Level, Raised};

pin_project_lite::pin_project! {
    /// A streamed body: an upstream's answer, or a worker's with the places its guest holds
    /// until it ends.
    #[derive(Debug)]
    pub struct Streamed {
        #[pin]
        inner: Inner,
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

/// A worker's streamed answer, and the instance slot (and share place) its guest runs in.
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
        Self { inner: Inner::Upstream { body } }
    }

    /// A worker's answer, holding `held` until it ends.
    pub(super) fn guest(body: StreamedBody, held: Held) -> Self {
        Self { inner: Inner::Guest { body: GuestBody { body, _held: held } } }
    }
}

/// An instance slot and a share place taken for a request, given back when dropped: the
/// permits' places are added back to their semaphores and the slots gauge lowered.
#[derive(Debug, Default)]
pub(super) struct Held {
    places: Vec<Arc<Semaphore>>,
    level: Option<Arc<Level>>,
}

impl Held {
    /// Keeps `slot` (its semaphore is `slots`, its gauge `in_use`) and `share` past the
    /// permits' borrows.
    pub(super) fn keep(
        slot: (SemaphorePermit<'_>, Raised<'_>),
        slots: &Arc<Semaphore>,
        in_use: &Arc<Level>,
        share: Option<(SemaphorePermit<'_>, &Arc<Semaphore>)>,
    ) -> Self {
        let (permit, raised) = slot;
        permit.forget();
        std::mem::forget(raised);
        let mut places = vec![slots.clone()];
        if let Some((permit, semaphore)) = share {
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
        match self.project().inner.project() {
            InnerProj::Upstream { body } => body.poll_frame(cx),
            InnerProj::Guest { body } => Pin::new(&mut body.body).poll_frame(cx),
        }
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
