//! A share of the instance slots (`server.max_concurrency`): a worker's `max_concurrency`,
//! or a tenant's `caps.concurrency` for all its workers together. A request holds a place in
//! each share that applies, as well as its slot, while its guest runs; past a share it waits
//! up to `server.queue_timeout`, then gets 503 `overloaded`. A leaf: the snapshot keeps the
//! workers', the tenants theirs.

use std::sync::Arc;

/// A share: `places` places.
#[derive(Debug, Clone)]
pub(crate) struct Share {
    pub(crate) places: u32,
    pub(crate) semaphore: Arc<tokio::sync::Semaphore>,
}
