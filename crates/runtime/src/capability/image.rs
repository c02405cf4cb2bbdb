//! The image capability's policy: what a worker granted `image` may do, and the pools that
//! bound the work (see `docs/limits.md#images`).

use std::sync::Arc;

use tokio::sync::Semaphore;

/// What a worker's image work may use. A worker without one gets `NotGranted` from the image
/// host calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageGrant {
    /// The pixel cap (input and output) and the output byte cap.
    pub limits: edgegate_image::Limits,
    /// Bytes of pixels the worker's transforms may hold at once, across its requests. A
    /// transform that needs more than all of it gets `LimitExceeded`; one that needs more than
    /// is free waits for it (within the request's deadline).
    pub memory: u64,
}

impl Default for ImageGrant {
    fn default() -> Self {
        Self { limits: edgegate_image::Limits::default(), memory: 256 << 20 }
    }
}

/// Memory is counted in KiB permits.
const UNIT: u64 = 1024;

/// A worker's grant, with the semaphore its transforms' memory is charged to.
#[derive(Debug)]
pub(crate) struct ImageShared {
    pub(crate) grant: ImageGrant,
    memory: Arc<Semaphore>,
    /// The runtime's image threads: at most this many transforms run at once, process-wide.
    threads: Arc<Semaphore>,
}

/// What a running transform holds: its memory and its thread, released when it ends (even if
/// the request that started it is gone).
#[derive(Debug)]
pub(crate) struct Held {
    _memory: tokio::sync::OwnedSemaphorePermit,
    _thread: tokio::sync::OwnedSemaphorePermit,
}

impl ImageShared {
    pub(crate) fn new(grant: ImageGrant, threads: Arc<Semaphore>) -> Self {
        let permits = usize::try_from(grant.memory / UNIT).unwrap_or(Semaphore::MAX_PERMITS);
        let memory = Arc::new(Semaphore::new(permits.min(Semaphore::MAX_PERMITS)));
        Self { grant, memory, threads }
    }

    /// Waits for `bytes` of the worker's image memory and for an image thread; `None` if
    /// `bytes` is more than the worker may ever hold.
    pub(crate) async fn hold(&self, bytes: u64) -> Option<Held> {
        if bytes > self.grant.memory {
            return None;
        }
        let permits = u32::try_from(bytes.div_ceil(UNIT)).ok()?;
        let memory = self.memory.clone().acquire_many_owned(permits).await.ok()?;
        let thread = self.threads.clone().acquire_owned().await.ok()?;
        Some(Held { _memory: memory, _thread: thread })
    }
}
