//! When the module cache is pruned: after start-up, then after reloads and deploys, at most
//! one prune at a time and one per [`PRUNE_INTERVAL`]. A prune reads every entry's metadata,
//! so running one per deploy would make a deploy's cost grow with the cache; a burst of
//! deploys is served by one prune at the end of the interval instead.
//!
//! A prune keeps every module a live worker runs (of any snapshot still held), read when it
//! starts, not when it was asked for.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use crate::code::module_cache::hex;
use crate::code::resident::Resident;

/// The least time between the starts of two prunes.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(5);

/// Schedules the module cache's prunes.
pub(crate) struct Pruner {
    resident: Arc<Resident>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When the last prune started.
    last: Option<Instant>,
    /// A prune is waiting to start.
    pending: bool,
}

impl Pruner {
    pub(crate) fn new(resident: Arc<Resident>) -> Arc<Self> {
        Arc::new(Self { resident, state: Mutex::default() })
    }

    /// Prunes the cache on the blocking pool: now, or at the end of the interval if a prune
    /// started within it (one prune then serves every request made meanwhile). Must run
    /// inside a tokio runtime; does nothing without a cache.
    pub(crate) fn request(self: &Arc<Self>) {
        if self.resident.loader.cache.is_none() {
            return;
        }
        let wait = {
            let mut state = self.state.lock();
            if state.pending {
                return;
            }
            state.pending = true;
            state.last.map_or(Duration::ZERO, |last| PRUNE_INTERVAL.saturating_sub(last.elapsed()))
        };
        let pruner = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let _ = tokio::task::spawn_blocking(move || pruner.prune()).await;
        });
    }

    fn prune(&self) {
        {
            let mut state = self.state.lock();
            state.pending = false;
            state.last = Some(Instant::now());
        }
        let Some(cache) = &self.resident.loader.cache else { return };
        let keep = self.resident.in_use().iter().map(|digest| hex(digest)).collect();
        match cache.prune(&keep, SystemTime::now()) {
            Ok(pruned) if pruned.removed > 0 => tracing::info!(
                removed = pruned.removed,
                bytes = pruned.bytes,
                kept = pruned.kept,
                "module cache pruned"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("module cache not pruned: {e}"),
        }
    }
}
