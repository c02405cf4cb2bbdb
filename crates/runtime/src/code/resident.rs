//! Workers' compiled code in memory. A worker's code is loaded when a request first needs it
//! (from the module cache, or compiled), kept while its module is among the `max_resident`
//! most recently used, and evicted after that: a worker nobody calls holds no code, no memory
//! image and no file descriptor. Workers with the same bytes share one entry, by sha256.
//!
//! A module's code also leaves when the last worker that runs it is dropped (a reload
//! replaced it, and the requests that began before finished).
//!
//! Concurrent first requests for one module wait for one load. Loads run on tokio's blocking
//! pool, at most `load_concurrency` at once, so a burst of first requests for many workers
//! cannot take every thread or every core.
//!
//! ```text
//!  request ─▶ lru.get(digest) ── hit ──▶ code
//!                 │ miss
//!                 ▼
//!            loading[digest] (one cell per module) ─▶ a permit ─▶ cache entry, or the source
//!                                                                 read again and compiled
//!                 ▼
//!            lru.push(digest, code) ─▶ the least recently used falls out
//! ```

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::{OnceCell, Semaphore};

use crate::code::Digest;
use crate::code::compiled::Abi;
use crate::code::entry::Code;
use crate::code::loader::Loader;
use crate::code::source::Source;
use crate::error::LoadError;

/// The resident set now, and what it has done since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResidentStats {
    /// Modules whose code is in memory now.
    pub resident: usize,
    /// Requests that found their worker's code resident.
    pub hits: u64,
    /// Loads of code: a worker's first request, the first after an eviction, or a check.
    pub loads: u64,
    /// Loads that failed (the module's file changed or went, and the cache had no code).
    pub load_failures: u64,
    /// Modules evicted to make room for another.
    pub evictions: u64,
}

/// The outcome of one load, shared by the requests that waited for it.
type Loaded = Result<Arc<Code>, Arc<LoadError>>;

/// The code in memory, and the loads under way.
pub(crate) struct Resident {
    /// What makes the code: the engines, the linkers and the module cache.
    pub(crate) loader: Loader,
    lru: Mutex<LruCache<Digest, Arc<Code>>>,
    /// The loads under way, one per module.
    loading: Mutex<HashMap<Digest, Arc<OnceCell<Loaded>>>>,
    /// How many workers (of any snapshot, and those requests still hold) run each module: a
    /// module no worker runs any more leaves the set at once.
    users: Mutex<HashMap<Digest, usize>>,
    permits: Semaphore,
    counters: Counters,
}

/// What the resident set has done (docs/observability.md has the metrics they become).
#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    loads: AtomicU64,
    failures: AtomicU64,
    evictions: AtomicU64,
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Resident {
    pub(crate) fn new(loader: Loader, max_resident: NonZeroUsize, load_concurrency: usize) -> Self {
        Self {
            loader,
            lru: Mutex::new(LruCache::new(max_resident)),
            loading: Mutex::default(),
            users: Mutex::default(),
            permits: Semaphore::new(load_concurrency.max(1)),
            counters: Counters::default(),
        }
    }

    fn lru(&self) -> MutexGuard<'_, LruCache<Digest, Arc<Code>>> {
        self.lru.lock()
    }

    fn loading(&self) -> MutexGuard<'_, HashMap<Digest, Arc<OnceCell<Loaded>>>> {
        self.loading.lock()
    }

    /// How many modules are resident, and what the set has done.
    pub(crate) fn stats(&self) -> ResidentStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ResidentStats {
            resident: self.lru().len(),
            hits: read(&self.counters.hits),
            loads: read(&self.counters.loads),
            load_failures: read(&self.counters.failures),
            evictions: read(&self.counters.evictions),
        }
    }

    /// The code of the module `digest` if it is resident, now the most recently used.
    pub(crate) fn resident(&self, digest: &Digest) -> Option<Arc<Code>> {
        let code = self.lru().get(digest).cloned();
        if code.is_some() {
            add(&self.counters.hits);
        }
        code
    }

    /// The code of the module `digest`, speaking `abi`, read from `source`: resident, or
    /// loaded now (once, however many requests ask at the same time).
    pub(crate) async fn code(
        self: &Arc<Self>,
        digest: &Digest,
        abi: Abi,
        source: &Source,
    ) -> Loaded {
        if let Some(code) = self.resident(digest) {
            return Ok(code);
        }
        let cell = self.loading().entry(*digest).or_default().clone();
        cell.get_or_init(|| async {
            // Loaded by a cell that finished between the look-up and this one.
            if let Some(code) = self.lru().get(digest).cloned() {
                return Ok(code);
            }
            let loaded = self.load(*digest, abi, source.clone()).await;
            self.loading().remove(digest);
            loaded
        })
        .await
        .clone()
    }

    /// Loads the code on the blocking pool, within the load permits, and makes it resident.
    async fn load(self: &Arc<Self>, digest: Digest, abi: Abi, source: Source) -> Loaded {
        let _permit = self.permits.acquire().await.map_err(|_| Arc::new(LoadError::Closed))?;
        let resident = self.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            let loader = &resident.loader;
            let (compiled, cache) = loader.compiled_again(&digest, abi, &source)?;
            let entry = crate::code::entry::link(&loader.linkers(), &compiled, None, &digest)?.0;
            Ok(Code { entry, cache })
        })
        .await
        .unwrap_or(Err(LoadError::Closed));
        match loaded {
            Ok(code) => Ok(self.keep(digest, code)),
            Err(error) => {
                add(&self.counters.failures);
                Err(Arc::new(error))
            }
        }
    }

    /// Makes `code` resident as the most recently used, evicting the least recently used if
    /// the set is full.
    pub(crate) fn keep(&self, digest: Digest, code: Code) -> Arc<Code> {
        let code = Arc::new(code);
        add(&self.counters.loads);
        metrics::counter!("edgegate_module_cache_total", "outcome" => self.loader.label(&code.cache))
            .increment(1);
        let mut lru = self.lru();
        if let Some((evicted, _)) = lru.push(digest, code.clone())
            && evicted != digest
        {
            add(&self.counters.evictions);
        }
        code
    }

    /// Counts a worker that runs module `digest`.
    pub(crate) fn add_user(&self, digest: &Digest) {
        *self.users.lock().entry(*digest).or_default() += 1;
    }

    /// Counts a worker that ran module `digest` gone; the module's code goes with the last.
    pub(crate) fn remove_user(&self, digest: &Digest) {
        let mut users = self.users.lock();
        let Some(count) = users.get_mut(digest) else { return };
        *count -= 1;
        if *count == 0 {
            users.remove(digest);
            self.lru().pop(digest);
        }
    }

    /// The modules some worker runs (of any snapshot still held).
    pub(crate) fn in_use(&self) -> Vec<Digest> {
        self.users.lock().keys().copied().collect()
    }

    /// Whether module `digest` is resident, without making it the most recently used.
    pub(crate) fn contains(&self, digest: &Digest) -> bool {
        self.lru().contains(digest)
    }
}
