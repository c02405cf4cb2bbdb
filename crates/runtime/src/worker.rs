//! Loading a module or a component as a worker: compile (or load from the cache), check it
//! speaks its ABI and fits its limits, link it, and keep a pre-instantiation (an
//! [`InstancePre`], or a component's `ProxyPre`) so each request only instantiates.

use std::collections::BTreeMap;
use std::sync::Arc;

use edgegate_abi::{ABI_VERSION, EXPORT_HANDLE, EXPORT_MEMORY};
use wasmtime::{ExternType, InstancePre, Module, ModuleExport, ValType};

use wasmtime_wasi_http::p2::bindings::ProxyPre;

use crate::Runtime;
use crate::compiled::{Abi, Compiled};
use crate::component::ComponentState;
use crate::error::{ExecError, LoadError};
use crate::fetch::Fetcher;
use crate::guest::{GuestOutcome, GuestRequest, RequestId, Usage, WorkerShared};
use crate::keys::Keys;
use crate::limits::Limits;
use crate::module_cache::CacheOutcome;
use crate::request::{self, RequestState, Target};

/// What to load: a module and the limits and configuration it runs with.
#[derive(Debug, Clone)]
pub struct WorkerSpec<'a> {
    /// The worker's name, for logs.
    pub name: &'a str,
    /// The module's bytes (binary Wasm).
    pub wasm: &'a [u8],
    /// Its limits.
    pub limits: Limits,
    /// The values `config_get` can read.
    pub config: BTreeMap<String, String>,
    /// The keys `jws_verify` checks signatures with; `None`: the worker has none, and the call
    /// answers `NotGranted`.
    pub keys: Option<Keys>,
    /// The KV namespaces the worker may use; any other is `NotGranted`.
    pub kv: Vec<edgegate_kv::Namespace>,
    /// How the worker's outbound requests are made; `None`: it may make none (`NotGranted`).
    pub fetcher: Option<Arc<dyn Fetcher>>,
    /// What its image work may use; `None`: the image host calls answer `NotGranted`.
    pub image: Option<crate::ImageGrant>,
}

/// A loaded worker, ready to serve requests. Cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<WorkerShared>,
    entry: Entry,
    cache: CacheOutcome,
    info: ModuleInfo,
}

/// How a request enters the worker.
enum Entry {
    /// A core module's `edgegate_v1_handle`.
    Core { pre: InstancePre<RequestState>, handle: ModuleExport, memory: ModuleExport },
    /// A component's `wasi:http/incoming-handler`.
    Component(ProxyPre<ComponentState>),
}

/// What a loaded module speaks and needs (all of it checked when it was loaded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The ABI it speaks.
    pub abi: Abi,
    /// What it imports, every one provided (it linked): host functions of a module,
    /// interfaces of a component.
    pub imports: Vec<String>,
    /// Bytes of memory it starts with (within the worker's limit: it loaded); for a
    /// component, all its memories together (0 from a `.cwasm`, which is not read).
    pub initial_memory: u64,
    /// The most memory it declares it may grow to, if it declares a maximum.
    pub maximum_memory: Option<u64>,
    /// The sha256 of the bytes it was loaded from, in hex: which version this is.
    pub digest: String,
}

impl ModuleInfo {
    fn of(module: &Module, digest: String) -> Self {
        let memory = match module.get_export(EXPORT_MEMORY) {
            Some(ExternType::Memory(m)) => Some(m),
            _ => None,
        };
        let page = memory.as_ref().map_or(0, |m| m.page_size());
        Self {
            abi: Abi::Core,
            imports: module.imports().map(|i| i.name().to_owned()).collect(),
            initial_memory: memory.as_ref().map_or(0, |m| m.minimum().saturating_mul(page)),
            maximum_memory: memory
                .as_ref()
                .and_then(|m| m.maximum())
                .map(|p| p.saturating_mul(page)),
            digest,
        }
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("name", &self.inner.shared.name).finish_non_exhaustive()
    }
}

impl Worker {
    pub(crate) fn load(runtime: &Runtime, spec: WorkerSpec<'_>) -> Result<Self, LoadError> {
        let max = runtime.config().max_memory;
        if spec.limits.memory > max {
            return Err(LoadError::MemoryLimitTooLarge { limit: spec.limits.memory, max });
        }
        let digest = crate::module_cache::sha256(spec.wasm);
        let (compiled, cache) = runtime.compiled(spec.wasm, digest)?;
        let hex = crate::module_cache::hex(&digest);
        let (entry, info) = match compiled {
            Compiled::Module(module) => core_entry(runtime, &module, &spec.limits, hex)?,
            Compiled::Component(component) => {
                let linker = runtime.component_linker();
                let (pre, imports, needs) =
                    crate::component::load(linker, &component, spec.wasm, &spec.limits)?;
                let info = ModuleInfo {
                    abi: Abi::HttpComponent,
                    imports,
                    initial_memory: needs.initial_memory,
                    maximum_memory: None,
                    digest: hex,
                };
                (Entry::Component(pre), info)
            }
        };
        let config_block = edgegate_abi::encode_entries(
            spec.config.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
        );
        let cpu_ticks = cpu_ticks(spec.limits.cpu, runtime.config().epoch_tick);
        let shared = Arc::new(WorkerShared {
            name: spec.name.to_owned(),
            limits: spec.limits,
            config: spec.config,
            config_block,
            keys: spec.keys,
            kv: spec.kv,
            fetcher: spec.fetcher,
            image: spec.image.map(|grant| {
                Arc::new(crate::image::ImageShared::new(grant, runtime.image_threads().clone()))
            }),
            wall_clock: runtime.config().wall_clock,
            cpu_ticks,
            epoch_tick: runtime.config().epoch_tick,
            activity: runtime.activity().clone(),
        });
        Ok(Self { inner: Arc::new(Inner { shared, entry, cache, info }) })
    }

    /// The worker's name.
    pub fn name(&self) -> &str {
        &self.inner.shared.name
    }

    /// The worker's limits.
    pub fn limits(&self) -> &Limits {
        &self.inner.shared.limits
    }

    /// The keys its `jws_verify` checks signatures with, if it has any.
    pub fn keys(&self) -> Option<&Keys> {
        self.inner.shared.keys.as_ref()
    }

    /// What the module speaks and needs.
    pub fn module_info(&self) -> &ModuleInfo {
        &self.inner.info
    }

    /// Whether the module came from the compilation cache.
    pub fn cache_outcome(&self) -> &CacheOutcome {
        &self.inner.cache
    }

    /// Instantiates the module once, as a request would (a fresh store within the worker's
    /// limits, a slot of the pool), and drops it without calling the guest: what a reload
    /// checks before it puts a new module in service.
    pub async fn trial(&self) -> Result<(), LoadError> {
        let shared = &self.inner.shared;
        match &self.inner.entry {
            Entry::Core { pre, .. } => request::trial(shared, pre).await,
            Entry::Component(pre) => crate::component::trial(shared, pre).await,
        }
        .map_err(LoadError::Trial)
    }

    /// The first 12 hex digits of the module's sha256: short enough for every log line.
    pub fn short_digest(&self) -> &str {
        &self.inner.info.digest[..12]
    }

    /// Serves one request in a fresh instance, dropped before this returns.
    ///
    /// Hot path: one store, one instantiation from the pool, one call, one copy of the
    /// response body out of guest memory.
    pub async fn handle(
        &self,
        request: GuestRequest,
        id: RequestId,
    ) -> Result<GuestOutcome, ExecError> {
        self.handle_measured(request, id).await.0
    }

    /// [`handle`](Self::handle), and what the request cost: instantiation, guest wall and CPU
    /// time, peak memory. The gateway's logs, metrics and `server-timing` come from it.
    pub async fn handle_measured(
        &self,
        request: GuestRequest,
        id: RequestId,
    ) -> (Result<GuestOutcome, ExecError>, Usage) {
        let inner = &*self.inner;
        match &inner.entry {
            Entry::Core { pre, handle, memory } => {
                let target = Target { shared: &inner.shared, pre, handle, memory };
                request::run(target, request, id).await
            }
            Entry::Component(pre) => crate::component::run(&inner.shared, pre, request, id).await,
        }
    }
}

/// A core module's entry, after checking it speaks ABI v1, fits `limits` and imports only
/// the ABI's host functions.
fn core_entry(
    runtime: &Runtime,
    module: &Module,
    limits: &Limits,
    digest: String,
) -> Result<(Entry, ModuleInfo), LoadError> {
    check_exports(module, limits)?;
    if let Some(import) =
        module.imports().find(|i| !edgegate_abi::imports::provided(i.module(), i.name()))
    {
        return Err(LoadError::UnknownImport(format!("{}::{}", import.module(), import.name())));
    }
    let info = ModuleInfo::of(module, digest);
    let pre = runtime.linker().instantiate_pre(module).map_err(LoadError::Link)?;
    let export = |name| module.get_export_index(name).ok_or(LoadError::NoEntryPoint);
    let handle = export(EXPORT_HANDLE)?;
    let memory = export(EXPORT_MEMORY)?;
    Ok((Entry::Core { pre, handle, memory }, info))
}

/// The budget in epoch ticks, rounded up, at least 1.
fn cpu_ticks(budget: std::time::Duration, tick: std::time::Duration) -> u32 {
    let ticks = budget.as_nanos().div_ceil(tick.as_nanos().max(1));
    u32::try_from(ticks).unwrap_or(u32::MAX).max(1)
}

/// Checks the exports against ABI v1 and the initial memory against the limit.
fn check_exports(module: &Module, limits: &Limits) -> Result<(), LoadError> {
    if let Some(found) = module
        .exports()
        .filter_map(|e| edgegate_abi::abi_version_of_export(e.name()))
        .find(|&v| v != ABI_VERSION)
    {
        return Err(LoadError::AbiVersion { found, supported: ABI_VERSION });
    }
    match module.get_export(EXPORT_HANDLE) {
        None => return Err(LoadError::NoEntryPoint),
        Some(ExternType::Func(f))
            if f.params().map(|p| p.matches(&ValType::I32)).eq([true])
                && f.results().map(|r| r.matches(&ValType::I64)).eq([true]) => {}
        Some(_) => {
            return Err(LoadError::BadExport {
                name: EXPORT_HANDLE,
                expected: "a function (i32) -> i64",
            });
        }
    }
    let bad_memory =
        LoadError::BadExport { name: EXPORT_MEMORY, expected: "a 32-bit linear memory" };
    let Some(ExternType::Memory(memory)) = module.get_export(EXPORT_MEMORY) else {
        return Err(bad_memory);
    };
    if memory.is_64() || memory.is_shared() {
        return Err(bad_memory);
    }
    let needed = memory.minimum().saturating_mul(memory.page_size());
    if needed > limits.memory {
        return Err(LoadError::InitialMemory { needed, limit: limits.memory });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cpu_ticks;
    use std::time::Duration;

    #[test]
    fn cpu_budget_in_ticks() {
        let ms = Duration::from_millis;
        assert_eq!(cpu_ticks(ms(2), ms(1)), 2);
        assert_eq!(cpu_ticks(Duration::from_micros(2500), ms(1)), 3);
        assert_eq!(cpu_ticks(Duration::from_micros(100), ms(1)), 1, "at least one");
        assert_eq!(
            cpu_ticks(Duration::from_secs(3600 * 24 * 365 * 1000), Duration::from_nanos(1)),
            u32::MAX
        );
    }
}
