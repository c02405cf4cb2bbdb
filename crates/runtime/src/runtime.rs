//! The [`Runtime`]: the engines, host functions and module cache workers are loaded into, one
//! per process.

use crate::code::compiled::Abi;
use crate::code::loader::Loader;
use crate::code::module_cache::ModuleCache;
use crate::code::prune;
use crate::code::resident::{self, ResidentStats};
use crate::component;
use crate::core_abi::hostcalls;
use crate::engine::{self, RuntimeConfig};

/// The engine, host functions and module cache that workers are loaded into. One per process.
pub struct Runtime {
    /// The engine, the linkers, the module cache, and the code loaded in this process.
    resident: std::sync::Arc<resident::Resident>,
    config: RuntimeConfig,
    ticker: engine::EpochTicker,
    /// The image threads every worker's transforms share (`RuntimeConfig::image_threads`).
    image_threads: std::sync::Arc<tokio::sync::Semaphore>,
    pruner: std::sync::Arc<prune::Pruner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .field("cache", &self.resident.loader.cache)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Creates the engine and its instance pool, and starts the epoch ticker thread.
    /// With `cache: None`, every load compiles.
    pub fn new(config: RuntimeConfig, cache: Option<ModuleCache>) -> anyhow::Result<Self> {
        let engines = engine::Engines::new(&config)?;
        let linker = hostcalls::linker(&engines.core)?;
        let component_linker = component::linker(&engines.component)?;
        let ticker = engine::EpochTicker::start(&engines, config.epoch_tick)?;
        let image_threads =
            std::sync::Arc::new(tokio::sync::Semaphore::new(config.image_threads.max(1)));
        let loader = Loader { engines, linker, component_linker, cache };
        let resident = std::sync::Arc::new(resident::Resident::new(
            loader,
            config.max_resident,
            config.load_concurrency,
        ));
        let pruner = prune::Pruner::new(resident.clone());
        Ok(Self { resident, config, ticker, image_threads, pruner })
    }

    /// Whether compiled modules are kept in an on-disk cache.
    pub fn caching(&self) -> bool {
        self.resident.loader.cache.is_some()
    }

    /// How the runtime was sized.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// How many modules' code is in memory, and the loads, hits and evictions so far.
    pub fn resident_stats(&self) -> ResidentStats {
        self.resident.stats()
    }

    pub(crate) fn resident(&self) -> &std::sync::Arc<resident::Resident> {
        &self.resident
    }

    pub(crate) fn image_threads(&self) -> &std::sync::Arc<tokio::sync::Semaphore> {
        &self.image_threads
    }

    /// What requests tell the epoch ticker, so that it ticks while they run.
    pub(crate) fn activity(&self) -> &std::sync::Arc<engine::Activity> {
        self.ticker.activity()
    }

    /// Compiles `wasm` (a module or a component) ahead of time for its engine: the bytes
    /// of a `.cwasm` that [`Runtime::load`] accepts in place of the Wasm, from this binary
    /// with the same settings only.
    pub fn precompile(&self, wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
        match Abi::of(wasm) {
            Abi::Core => self.resident.loader.engines.core.precompile_module(wasm),
            Abi::HttpComponent => self.resident.loader.engines.component.precompile_component(wasm),
        }
    }

    /// Prunes the module cache on the blocking pool, keeping every module a live worker
    /// runs: now, or at the end of [`PRUNE_INTERVAL`](prune::PRUNE_INTERVAL) if a prune started within it. Call it
    /// after start-up and after each reload or deploy; must run inside a tokio runtime.
    pub fn prune_cache(&self) {
        self.pruner.request();
    }
}
