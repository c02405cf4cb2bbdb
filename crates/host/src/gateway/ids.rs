//! Request ids: unique within a process and unlikely to repeat across restarts.

use std::sync::atomic::{AtomicU64, Ordering};

use edgegate_runtime::RequestId;

/// Unique request ids: a random start, then counting.
#[derive(Debug)]
pub(crate) struct RequestIds {
    start: u64,
    next: AtomicU64,
}

impl RequestIds {
    pub(crate) fn new() -> Self {
        let mut bytes = [0u8; 8];
        // A fixed start would only make ids less unique across restarts.
        let _ = getrandom::fill(&mut bytes);
        Self { start: u64::from_le_bytes(bytes), next: AtomicU64::new(0) }
    }

    pub(crate) fn next(&self) -> RequestId {
        RequestId(self.start.wrapping_add(self.next.fetch_add(1, Ordering::Relaxed)))
    }
}
