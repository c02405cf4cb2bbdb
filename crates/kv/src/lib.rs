//! edgegate's key-value stores, behind one trait.
//!
//! A worker reads and writes KV *namespaces* that its configuration grants. Each namespace
//! lives in one of three backends, all with the same semantics ([`Backend`]), checked by one
//! conformance suite run against each:
//!
//! | backend | for | reads | writes |
//! |---|---|---|---|
//! | [`MemoryStore`] | one node, the default | sharded swiss tables (`dashmap`), no I/O | in place |
//! | [`DiskStore`] | one node, data that must survive a restart | redb, from its page cache | one durable (fsync'd) transaction per call, off the runtime threads |
//! | [`RedisStore`] | several nodes sharing state | one round trip | one round trip (a batch is one `MULTI`) |
//!
//! Keys and values are bytes. Keys are never paths: a key is a map key in every backend, in
//! Redis prefixed with its namespace. Counters ([`Backend::incr`]) are stored as decimal text,
//! as Redis stores them.
//!
//! Every call has a bounded duration: memory calls do no I/O, disk calls wait for the disk,
//! Redis calls time out (`RedisSettings::timeout`) with [`KvError::Timeout`] and fail fast with
//! [`KvError::Unavailable`] while Redis is down; the connection is re-established in the
//! background, so calls succeed again once Redis is back.
//!
//! Besides the namespaces, [`RedisStore::gcra`] counts a shared rate limit in Redis ([`Gcra`]).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod disk;
mod gcra;
mod memory;
pub mod metrics;
mod remote;
mod seed;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub use disk::{DiskFile, DiskStore};
pub use gcra::Gcra;
pub use memory::MemoryStore;
pub use remote::{RedisSettings, RedisStore};
pub use seed::{SeedEntry, SeedError, parse_seed};

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// `incr` on a value that is not a decimal `i64`, or a sum that overflows one.
    #[error("the value is not an integer, or the sum overflows")]
    NotAnInteger,
    /// A memory namespace is full.
    #[error("the namespace is full ({capacity} bytes)")]
    Full {
        /// Its capacity, in bytes of keys and values.
        capacity: u64,
    },
    /// The store cannot be reached, or failed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store did not answer in time.
    #[error("store did not answer within {0:?}")]
    Timeout(Duration),
}

/// The operations every backend implements, with the same semantics.
///
/// * A TTL of `None` keeps an entry until it is deleted; an expired entry is gone for every
///   operation, whether or not it has been purged yet.
/// * [`Backend::incr`] treats a missing key as 0 and sets `ttl` only when the key has no
///   expiry yet (a fixed window for a rate limiter).
/// * [`Backend::list`] answers keys in bytewise order.
pub trait Backend: Send + Sync {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Bytes>, KvError>> + Send;
    /// The values under `keys`, in order.
    fn get_many(
        &self,
        keys: &[&[u8]],
    ) -> impl Future<Output = Result<Vec<Option<Bytes>>, KvError>> + Send;
    /// Stores `value` under `key`.
    fn put(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Option<Duration>,
    ) -> impl Future<Output = Result<(), KvError>> + Send;
    /// Stores every entry, all or none where the backend has transactions (disk, Redis).
    fn put_many(
        &self,
        entries: &[(&[u8], &[u8])],
        ttl: Option<Duration>,
    ) -> impl Future<Output = Result<(), KvError>> + Send;
    /// Removes `key`; whether it existed.
    fn delete(&self, key: &[u8]) -> impl Future<Output = Result<bool, KvError>> + Send;
    /// Adds `delta` to the integer under `key` and returns the sum.
    fn incr(
        &self,
        key: &[u8],
        delta: i64,
        ttl: Option<Duration>,
    ) -> impl Future<Output = Result<i64, KvError>> + Send;
    /// At most `limit` keys that start with `prefix` and sort after `after`, in order.
    fn list(
        &self,
        prefix: &[u8],
        after: &[u8],
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Bytes>, KvError>> + Send;
}

/// Which backend a namespace lives in.
#[derive(Debug, Clone)]
pub enum Store {
    /// In this process.
    Memory(Arc<MemoryStore>),
    /// In a redb file.
    Disk(Arc<DiskStore>),
    /// In Redis.
    Redis(Arc<RedisStore>),
}

impl Store {
    /// The backend's name, for logs and metrics: `memory`, `redb` or `redis`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            Self::Disk(_) => "redb",
            Self::Redis(_) => "redis",
        }
    }
}

/// Calls the same method on whichever backend a [`Store`] holds. Static dispatch: the memory
/// backend's calls stay inline and allocation-free. The disk and Redis futures are boxed, so
/// that their size (a Redis call's is kilobytes) does not make every caller's future as large
/// (and, in the hostcalls, every heap allocation and copy of it).
macro_rules! dispatch {
    ($store:expr, $backend:ident => $call:expr) => {
        match $store {
            Store::Memory($backend) => $call.await,
            Store::Disk($backend) => Box::pin($call).await,
            Store::Redis($backend) => Box::pin($call).await,
        }
    };
}

impl Backend for Store {
    async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        dispatch!(self, b => b.get(key))
    }

    async fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, KvError> {
        dispatch!(self, b => b.get_many(keys))
    }

    async fn put(&self, key: &[u8], value: &[u8], ttl: Option<Duration>) -> Result<(), KvError> {
        dispatch!(self, b => b.put(key, value, ttl))
    }

    async fn put_many(
        &self,
        entries: &[(&[u8], &[u8])],
        ttl: Option<Duration>,
    ) -> Result<(), KvError> {
        dispatch!(self, b => b.put_many(entries, ttl))
    }

    async fn delete(&self, key: &[u8]) -> Result<bool, KvError> {
        dispatch!(self, b => b.delete(key))
    }

    async fn incr(&self, key: &[u8], delta: i64, ttl: Option<Duration>) -> Result<i64, KvError> {
        dispatch!(self, b => b.incr(key, delta, ttl))
    }

    async fn list(&self, prefix: &[u8], after: &[u8], limit: usize) -> Result<Vec<Bytes>, KvError> {
        dispatch!(self, b => b.list(prefix, after, limit))
    }
}

/// A namespace a worker may be granted: a name and the store it lives in.
#[derive(Debug, Clone)]
pub struct Namespace {
    /// The name workers use.
    pub name: Arc<str>,
    /// Where it lives.
    pub store: Store,
}

/// `current + delta` for a counter stored as decimal text (`None`: 0).
pub(crate) fn add_to_counter(current: Option<&[u8]>, delta: i64) -> Result<i64, KvError> {
    let current = match current {
        None => 0,
        Some(text) => std::str::from_utf8(text)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .ok_or(KvError::NotAnInteger)?,
    };
    current.checked_add(delta).ok_or(KvError::NotAnInteger)
}

/// Whether `key` is listed for `prefix` and `after`.
pub(crate) fn listed(key: &[u8], prefix: &[u8], after: &[u8]) -> bool {
    key.starts_with(prefix) && key > after
}
