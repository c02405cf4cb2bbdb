//! What a request's guest used: its [`Usage`] when its call has ended, and, for a guest whose
//! answer still streams, its [`Progress`], told as it goes. A leaf of the runtime: the meter
//! and both ABIs write them, the host reads them.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::error::ExecErrorKind;

/// What one request's guest cost, measured whether it answered or failed (what was not
/// reached stays zero: a request refused for capacity never instantiated).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Wall time waiting for the worker's code: zero when it was resident, else its load
    /// (from the module cache, or a compile) or the wait for another request's.
    pub load: Duration,
    /// Wall time to instantiate the module: a pool slot, copy-on-write memory, the start.
    pub instantiate: Duration,
    /// Wall time of the guest's call, waits for async host calls included.
    pub guest: Duration,
    /// CPU time of the guest's call on its thread: what the CPU budget counts (the waits are
    /// not in it).
    pub cpu: Duration,
    /// The guest's linear memory at the end, in bytes: its peak, since Wasm memory only grows.
    pub memory_peak: u64,
    /// KV operations it made (a batch counts each key), as its `kv_ops` limit counts them.
    pub kv_ops: u32,
    /// Outbound requests it started, as its `subrequests` limit counts them.
    pub fetches: u32,
}

/// What a guest whose answer is still streaming has used so far, and, once its answer has
/// ended, whether it was cut and why. Shared by the guest's task and its body, so that what it
/// cost is known however the stream ends: whole, cut at a limit, or dropped by a client that
/// went away (which aborts the guest). Only a component streams; a core module's cost is in
/// its [`Usage`].
#[derive(Debug, Default)]
pub struct Progress {
    pub(crate) cpu_ns: AtomicU64,
    pub(crate) memory_peak: AtomicU64,
    pub(crate) kv_ops: AtomicU32,
    pub(crate) fetches: AtomicU32,
    pub(crate) instantiate_ns: AtomicU64,
    pub(crate) guest_ns: AtomicU64,
    /// Why the answer was cut after its head was sent, once it was.
    pub(crate) cut: std::sync::OnceLock<ExecErrorKind>,
}

impl Progress {
    /// What the guest has used so far.
    pub fn usage(&self) -> Usage {
        let ns = |n: &AtomicU64| Duration::from_nanos(n.load(Relaxed));
        Usage {
            load: Duration::ZERO,
            instantiate: ns(&self.instantiate_ns),
            guest: ns(&self.guest_ns),
            cpu: ns(&self.cpu_ns),
            memory_peak: self.memory_peak.load(Relaxed),
            kv_ops: self.kv_ops.load(Relaxed),
            fetches: self.fetches.load(Relaxed),
        }
    }

    /// Why the answer was cut off after its head was sent, if it was: a limit (the response
    /// body's, the deadline) or the guest's failure.
    pub fn cut(&self) -> Option<ExecErrorKind> {
        self.cut.get().copied()
    }

    pub(crate) fn set_memory(&self, bytes: u64) {
        self.memory_peak.fetch_max(bytes, Relaxed);
    }
}
