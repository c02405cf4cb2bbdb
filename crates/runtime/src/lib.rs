//! The edgegate runtime: runs a worker's WebAssembly for each request in a fresh instance,
//! within the worker's limits.
//!
//! * A [`Runtime`] owns the Wasmtime engines, one per ABI (pooling allocator, copy-on-write
//!   memory images, epoch interruption; components check bounds in code, [`BoundsChecks`]),
//!   the host functions of both ABIs, and the on-disk [`ModuleCache`] of compiled modules.
//! * [`Runtime::prepare`] turns a module into a [`Worker`]: checked against ABI v1 and its
//!   [`Limits`] (compiled and instantiated once, unless the module cache records that these
//!   bytes passed before); its code is loaded by its first request and kept while it is among
//!   the most recently used. [`Runtime::load`] loads the code at once.
//! * [`Worker::handle`] serves one [`GuestRequest`]: a new store and instance, the guest's
//!   entry point, then the decoded [`GuestOutcome`] (a response or a forward directive) or an
//!   [`ExecError`] whose kind says what the worker did wrong.
//!
//! ```no_run
//! # async fn demo(wasm: &'static [u8]) -> anyhow::Result<()> {
//! use edgegate_runtime::*;
//! let runtime = Runtime::new(RuntimeConfig::default(), None)?;
//! let worker = runtime.load(WorkerSpec {
//!     name: "echo-json",
//!     source: Source::Bytes(wasm.into()),
//!     native_code: false,
//!     limits: Limits::default(),
//!     config: Default::default(),
//!     keys: None,
//!     kv: Vec::new(),
//!     fetcher: None,
//!     image: None,
//! })?;
//! let request = GuestRequest { body: "{}".into(), ..Default::default() };
//! match worker.handle(request, RequestId(1)).await {
//!     Ok(GuestOutcome::Response(response)) => println!("{}", response.status()),
//!     Ok(GuestOutcome::Streamed(response, _)) => println!("{}, streaming", response.status()),
//!     Ok(GuestOutcome::Forward(forward)) => println!("to {}", forward.upstream),
//!     Err(error) => println!("{}", error.kind().code()),
//! }
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod compiled;
mod component;
mod cpu;
mod engine;
mod entry;
mod error;
mod escape;
pub mod fetch;
mod guest;
mod hostcalls;
mod image;
pub mod keys;
mod limits;
mod meter;
mod module_cache;
mod outcome;
mod prune;
mod request;
mod resident;
mod source;
pub mod token;
pub mod units;
mod usage;
mod worker;

#[cfg(test)]
mod tests;

/// The `tracing` target of edgegate's trace spans (request, instantiate, guest, hostcalls,
/// upstream): exported over OTLP when configured, and kept out of the logs.
pub const SPAN_TARGET: &str = "edgegate::span";

pub use compiled::{Abi, ModuleInfo, binary_wasm};
pub use component::provides as component_provides;
pub use engine::{BoundsChecks, RuntimeConfig};
pub use error::{ExecError, ExecErrorKind, LoadError};
pub use fetch::{FetchError, FetchFuture, Fetcher};
pub use guest::{Forward, GuestOutcome, GuestRequest, HeaderEdit, RequestId, StreamedBody};
pub use image::ImageGrant;
pub use keys::Keys;
pub use limits::Limits;
pub use module_cache::{CacheOutcome, ModuleCache, PULLED_MODULES, Pruned, Pruning, module_digest};
pub use prune::PRUNE_INTERVAL;
pub use resident::ResidentStats;
pub use source::{Source, Stamp};
pub use units::ByteSize;
pub use usage::{Progress, Usage};
pub use worker::{Checked, Worker, WorkerSpec};

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
            .field("cache", &self.resident.cache)
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
        let resident = std::sync::Arc::new(resident::Resident::new(
            engines,
            linker,
            component_linker,
            cache,
            config.max_resident,
            config.load_concurrency,
        ));
        let pruner = prune::Pruner::new(resident.clone());
        Ok(Self { resident, config, ticker, image_threads, pruner })
    }

    /// Whether compiled modules are kept in an on-disk cache.
    pub fn caching(&self) -> bool {
        self.resident.cache.is_some()
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
            Abi::Core => self.resident.engines.core.precompile_module(wasm),
            Abi::HttpComponent => self.resident.engines.component.precompile_component(wasm),
        }
    }

    /// Prunes the module cache on the blocking pool, keeping every module a live worker
    /// runs: now, or at the end of [`PRUNE_INTERVAL`] if a prune started within it. Call it
    /// after start-up and after each reload or deploy; must run inside a tokio runtime.
    pub fn prune_cache(&self) {
        self.pruner.request();
    }
}
