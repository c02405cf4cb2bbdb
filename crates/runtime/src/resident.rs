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
use wasmtime::{Engine, Linker};

use crate::compiled::{Abi, Compiled, ModuleInfo};
use crate::component::ComponentState;
use crate::engine::Engines;
use crate::entry::{Code, Linkers};
use crate::error::LoadError;
use crate::module_cache::{CacheOutcome, ModuleCache};
use crate::request::RequestState;
use crate::source::Source;

/// A module's sha256.
pub(crate) type Digest = [u8; 32];

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

/// The engines, the linkers and the module cache, and the code they made.
pub(crate) struct Resident {
    pub(crate) engines: Engines,
    pub(crate) linker: Linker<RequestState>,
    pub(crate) component_linker: wasmtime::component::Linker<ComponentState>,
    pub(crate) cache: Option<ModuleCache>,
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
    pub(crate) fn new(
        engines: Engines,
        linker: Linker<RequestState>,
        component_linker: wasmtime::component::Linker<ComponentState>,
        cache: Option<ModuleCache>,
        max_resident: NonZeroUsize,
        load_concurrency: usize,
    ) -> Self {
        Self {
            engines,
            linker,
            component_linker,
            cache,
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

    /// The linkers, for [`crate::entry::link`].
    pub(crate) fn linkers(&self) -> Linkers<'_> {
        Linkers { core: &self.linker, component: &self.component_linker }
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
            let (compiled, cache) = resident.compiled_again(&digest, abi, &source)?;
            let entry = crate::entry::link(&resident.linkers(), &compiled, None, &digest)?.0;
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
        metrics::counter!("edgegate_module_cache_total", "outcome" => self.label(&code.cache))
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

    /// Code for `wasm`, whose sha256 is `digest`: from the module cache, or compiled (and
    /// stored), or deserialized (a `.cwasm`).
    pub(crate) fn compiled(
        &self,
        wasm: &[u8],
        digest: &Digest,
    ) -> Result<(Compiled, CacheOutcome), LoadError> {
        let abi = Abi::of(wasm);
        let engine = self.engines.of(abi);
        if Engine::detect_precompiled(wasm).is_some() {
            // SAFETY: deserializing runs the artifact's machine code, so it must be a
            // `precompile_*` output. A `.cwasm` is code the operator deploys, trusted like this
            // binary (docs/toolchain.md says so); Wasmtime checks its header and refuses one
            // from another version or with other settings.
            let compiled = unsafe { Compiled::deserialize(engine, wasm, abi) }
                .map_err(LoadError::Precompiled)?;
            return Ok((compiled, CacheOutcome::Precompiled));
        }
        match &self.cache {
            Some(cache) => cache.load_or_compile(engine, wasm, digest),
            None => Compiled::compile(engine, wasm).map(|c| (c, CacheOutcome::Miss)),
        }
        .map_err(LoadError::Compile)
    }

    /// Code for a module checked before: the cache's entry if it has one (the source is not
    /// even read), else the source read again, its digest checked, and compiled as any module
    /// is ([`Resident::compiled`], which says whether a cache entry was refused).
    fn compiled_again(
        &self,
        digest: &Digest,
        abi: Abi,
        source: &Source,
    ) -> Result<(Compiled, CacheOutcome), LoadError> {
        if let Some(cache) = &self.cache
            && let Ok(Some(compiled)) = cache.load(self.engines.of(abi), digest, abi)
        {
            return Ok((compiled, CacheOutcome::Hit));
        }
        let wasm = source.read_again(digest)?;
        self.compiled(&wasm, digest)
    }

    /// The `outcome` label of `edgegate_module_cache_total`.
    fn label(&self, outcome: &CacheOutcome) -> &'static str {
        match outcome {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss if self.cache.is_none() => "off",
            CacheOutcome::Miss => "miss",
            CacheOutcome::Rejected(_) => "rejected",
            CacheOutcome::NotStored(_) => "not_stored",
            CacheOutcome::Precompiled => "precompiled",
        }
    }

    /// The check a module of this ABI passed before, recorded in the module cache.
    pub(crate) fn checked(&self, digest: &Digest, abi: Abi) -> Option<ModuleInfo> {
        self.cache.as_ref()?.checked(self.engines.of(abi), digest)
    }

    /// Records that a module passed its full check.
    pub(crate) fn record_checked(&self, digest: &Digest, info: &ModuleInfo) {
        if let Some(cache) = &self.cache {
            cache.record_checked(self.engines.of(info.abi), digest, info);
        }
    }
}
