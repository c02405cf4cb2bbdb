//! The edgegate runtime: runs a worker's WebAssembly for each request in a fresh instance,
//! within the worker's limits.
//!
//! * A [`Runtime`] owns the one Wasmtime engine (pooling allocator, copy-on-write memory
//!   images, epoch interruption), the host functions of the guest ABI, and the on-disk
//!   [`ModuleCache`] of compiled modules.
//! * [`Runtime::load`] turns a module into a [`Worker`]: compiled once, checked against ABI v1
//!   and its [`Limits`], linked.
//! * [`Worker::handle`] serves one [`GuestRequest`]: a new store and instance, the guest's
//!   entry point, then the decoded [`GuestOutcome`] (a response or a forward directive) or an
//!   [`ExecError`] whose kind says what the worker did wrong.
//!
//! ```no_run
//! # async fn demo(wasm: &[u8]) -> anyhow::Result<()> {
//! use edgegate_runtime::*;
//! let runtime = Runtime::new(RuntimeConfig::default(), None)?;
//! let worker = runtime.load(WorkerSpec {
//!     name: "echo-json",
//!     wasm,
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
mod request;
pub mod units;
mod worker;

#[cfg(test)]
mod tests;

/// The `tracing` target of edgegate's trace spans (request, instantiate, guest, hostcalls,
/// upstream): exported over OTLP when configured, and kept out of the logs.
pub const SPAN_TARGET: &str = "edgegate::span";

pub use compiled::Abi;
pub use component::provides as component_provides;
pub use engine::RuntimeConfig;
pub use error::{ExecError, ExecErrorKind, LoadError};
pub use fetch::{FetchError, FetchFuture, Fetcher};
pub use guest::{Forward, GuestOutcome, GuestRequest, HeaderEdit, RequestId, Usage};
pub use image::ImageGrant;
pub use keys::Keys;
pub use limits::Limits;
pub use module_cache::{CacheOutcome, ModuleCache, Pruned, Pruning};
pub use units::ByteSize;
pub use worker::{ModuleInfo, Worker, WorkerSpec};

use compiled::Compiled;
use request::RequestState;
use wasmtime::{Engine, Linker};

/// The engine, host functions and module cache that workers are loaded into. One per process.
pub struct Runtime {
    engine: Engine,
    linker: Linker<RequestState>,
    /// The host side of the `wasi:http/proxy` world, for components.
    component_linker: wasmtime::component::Linker<component::ComponentState>,
    cache: Option<ModuleCache>,
    config: RuntimeConfig,
    ticker: engine::EpochTicker,
    /// The image threads every worker's transforms share (`RuntimeConfig::image_threads`).
    image_threads: std::sync::Arc<tokio::sync::Semaphore>,
    /// The modules loaded in this process, by the sha256 of their bytes: loading the same
    /// bytes again (a reload) shares the compiled code. [`Runtime::retain_modules`] forgets
    /// the ones no worker uses any more.
    modules: std::sync::Mutex<std::collections::HashMap<[u8; 32], Compiled>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Creates the engine and its instance pool, and starts the epoch ticker thread.
    /// With `cache: None`, every load compiles.
    pub fn new(config: RuntimeConfig, cache: Option<ModuleCache>) -> anyhow::Result<Self> {
        let engine = engine::new_engine(&config)?;
        let linker = hostcalls::linker(&engine)?;
        let component_linker = component::linker(&engine)?;
        let ticker = engine::EpochTicker::start(&engine, config.epoch_tick)?;
        let image_threads =
            std::sync::Arc::new(tokio::sync::Semaphore::new(config.image_threads.max(1)));
        let modules = std::sync::Mutex::default();
        Ok(Self { engine, linker, component_linker, cache, config, ticker, image_threads, modules })
    }

    /// Loads a module as a worker.
    pub fn load(&self, spec: WorkerSpec<'_>) -> Result<Worker, LoadError> {
        Worker::load(self, spec)
    }

    /// Whether compiled modules are kept in an on-disk cache.
    pub fn caching(&self) -> bool {
        self.cache.is_some()
    }

    /// How the runtime was sized.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub(crate) fn linker(&self) -> &Linker<RequestState> {
        &self.linker
    }

    pub(crate) fn component_linker(
        &self,
    ) -> &wasmtime::component::Linker<component::ComponentState> {
        &self.component_linker
    }

    pub(crate) fn image_threads(&self) -> &std::sync::Arc<tokio::sync::Semaphore> {
        &self.image_threads
    }

    /// What requests tell the epoch ticker, so that it ticks while they run.
    pub(crate) fn activity(&self) -> &std::sync::Arc<engine::Activity> {
        self.ticker.activity()
    }

    /// Compiles `wasm` (a module or a component) ahead of time for this engine: the bytes
    /// of a `.cwasm` that [`Runtime::load`] accepts in place of the Wasm, from this binary
    /// with the same settings only.
    pub fn precompile(&self, wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
        match Abi::of(wasm) {
            Abi::Core => self.engine.precompile_module(wasm),
            Abi::HttpComponent => self.engine.precompile_component(wasm),
        }
    }

    /// Forgets the loaded modules whose sha256 (as [`ModuleInfo::digest`] gives it) is not
    /// in `keep`: the next load of those bytes reads the cache or compiles again. A worker
    /// still serving keeps its own module alive.
    pub fn retain_modules<'a>(&self, keep: impl IntoIterator<Item = &'a str>) {
        let keep: std::collections::HashSet<&str> = keep.into_iter().collect();
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        modules.retain(|digest, _| keep.contains(module_cache::hex(digest).as_str()));
    }

    /// The module cache, if there is one, and its entries for the modules loaded now: what a
    /// [`ModuleCache::prune`] must keep.
    pub fn cache_in_use(
        &self,
    ) -> Option<(ModuleCache, std::collections::HashSet<std::path::PathBuf>)> {
        let cache = self.cache.clone()?;
        let modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        let keep = modules.keys().map(|digest| cache.entry_path(&self.engine, digest)).collect();
        Some((cache, keep))
    }

    /// The code for `wasm`, whose sha256 is `digest`: already loaded, or compiled (or loaded
    /// from the cache) and remembered.
    pub(crate) fn compiled(
        &self,
        wasm: &[u8],
        digest: [u8; 32],
    ) -> Result<(Compiled, CacheOutcome), LoadError> {
        let lock = || self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(module) = lock().get(&digest) {
            return Ok((module.clone(), CacheOutcome::Reused));
        }
        let (module, outcome) = self.compile(wasm)?;
        lock().insert(digest, module.clone());
        Ok((module, outcome))
    }

    fn compile(&self, wasm: &[u8]) -> Result<(Compiled, CacheOutcome), LoadError> {
        if Engine::detect_precompiled(wasm).is_some() {
            // SAFETY: deserializing runs the artifact's machine code, so it must be a
            // `precompile_*` output. A `.cwasm` is code the operator deploys, trusted like this
            // binary (docs/toolchain.md says so); Wasmtime checks its header and refuses one
            // from another version or with other settings.
            let compiled = unsafe { Compiled::deserialize(&self.engine, wasm, Abi::of(wasm)) }
                .map_err(LoadError::Precompiled)?;
            return Ok((compiled, CacheOutcome::Precompiled));
        }
        match &self.cache {
            Some(cache) => cache.load_or_compile(&self.engine, wasm),
            None => Compiled::compile(&self.engine, wasm).map(|c| (c, CacheOutcome::Miss)),
        }
        .map_err(LoadError::Compile)
    }
}
