//! A module or a component as a worker: checked (it speaks its ABI and fits its limits), and
//! its code (a pre-instantiation: an `InstancePre`, or a component's `ProxyPre`) loaded now
//! or by its first request (crate::code::resident), so each request only instantiates.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::capability::fetch::Fetcher;
use crate::capability::keys::Keys;
use crate::code::Digest;
use crate::code::compiled::ModuleInfo;
use crate::code::entry::{Code, Entry};
use crate::code::module_cache::CacheOutcome;
use crate::code::resident::Resident;
use crate::code::source::{Source, Stamp};
use crate::core_abi::request::{self, Target};
use crate::error::{ExecError, ExecErrorKind, LoadError};
use crate::guest::{GuestOutcome, GuestRequest, RequestId, WorkerShared};
use crate::limits::Limits;
use crate::limits::usage::Usage;
use crate::runtime::Runtime;

/// What to load: a module and the limits and configuration it runs with.
#[derive(Debug, Clone)]
pub struct WorkerSpec<'a> {
    /// The worker's name, for logs.
    pub name: &'a str,
    /// Where its module comes from (binary Wasm, a component or a `.cwasm`).
    pub source: Source,
    /// Whether its bytes may be a `.cwasm`: native code made by `edgegate compile`, which is
    /// deserialized and run as it is, never validated. Only for modules the operator's
    /// configuration file names. `false`: binary Wasm only, a module or a component (its
    /// header, then the engine's validation); a `.cwasm`, WAT text or anything else is
    /// refused with [`LoadError::NotWasm`]. What the admin API and registries hand over.
    pub native_code: bool,
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
    pub image: Option<crate::capability::image::ImageGrant>,
}

/// A worker, ready to serve requests: checked, with its code loaded on its first request
/// (crate::code::resident). Cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<WorkerShared>,
    info: ModuleInfo,
    digest: Digest,
    source: Source,
    /// What the source file looked like when it was read.
    stamp: Option<Stamp>,
    resident: Arc<Resident>,
    checked: Checked,
}

/// How a worker was checked: by [`Runtime::prepare`], or [`Runtime::load`] (always
/// [`Checked::Loaded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// The same bytes as the worker it replaces (the file unchanged): nothing was read.
    Unchanged,
    /// The module cache records an earlier full check of these bytes: they were read and
    /// hashed, nothing was compiled.
    Recorded,
    /// Compiled (or loaded from the cache), linked and instantiated once; its code is now
    /// resident.
    Loaded(CacheOutcome),
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.resident.remove_user(&self.digest);
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("name", &self.inner.shared.name).finish_non_exhaustive()
    }
}

impl Runtime {
    /// Loads a module as a worker now: compiled (or read from the cache), checked, linked and
    /// resident, so its first request does not wait. It stays resident while it is among the
    /// most recently used; after an eviction its next request loads it again from `source`.
    pub fn load(&self, spec: WorkerSpec<'_>) -> Result<Worker, LoadError> {
        let (wasm, digest, stamp) = spec.source.read()?;
        admit(&spec, &wasm)?;
        let (worker, code) = self.compile_worker(spec, &wasm, digest, stamp)?;
        self.resident().keep(digest, code);
        Ok(worker)
    }

    /// `spec`'s worker and its code, from `wasm` (whose sha256 is `digest`): compiled (or
    /// read from the cache), checked against its ABI and the worker's limits, linked.
    fn compile_worker(
        &self,
        spec: WorkerSpec<'_>,
        wasm: &[u8],
        digest: Digest,
        stamp: Option<Stamp>,
    ) -> Result<(Worker, Code), LoadError> {
        let resident = self.resident();
        let (compiled, cache) = resident.loader.compiled(wasm, &digest)?;
        let (entry, info) =
            crate::code::entry::link(&resident.loader.linkers(), &compiled, Some(wasm), &digest)?;
        info.fits(&spec.limits, self.config().max_memory)?;
        let worker = Worker::new(self, spec, info, digest, stamp, Checked::Loaded(cache.clone()));
        Ok((worker, Code { entry, cache }))
    }

    /// Checks a module as a worker without keeping its code, where that can be trusted:
    ///
    /// * `previous`, the worker it replaces, has the same bytes (the same file, unchanged):
    ///   nothing is read;
    /// * the module cache records an earlier full check of these bytes (never of a `.cwasm`,
    ///   which loads without compiling): they are read and hashed, and the worker's limits
    ///   checked against the record;
    /// * otherwise the full check: compiled (or loaded from the cache), checked against its
    ///   ABI and limits, linked, and instantiated once, as a request would; the check is
    ///   recorded, and the code stays resident.
    ///
    /// Either way the worker's code is loaded by its first request, if it is not resident.
    pub async fn prepare(
        &self,
        spec: WorkerSpec<'_>,
        previous: Option<&Worker>,
    ) -> Result<Worker, LoadError> {
        let max = self.config().max_memory;
        if let Some(previous) = previous
            && spec.source.same_as(&previous.inner.source, previous.inner.stamp)
        {
            return self.unchanged(spec, previous);
        }
        let (wasm, digest, stamp) = spec.source.read()?;
        admit(&spec, &wasm)?;
        let resident = self.resident();
        // A `.cwasm` loads without Cranelift: checking it in full costs little, and says so.
        let precompiled = wasmtime::Engine::detect_precompiled(&wasm).is_some();
        let abi = crate::code::compiled::Abi::of(&wasm);
        if let Some(info) = (!precompiled).then(|| resident.loader.checked(&digest, abi)).flatten()
        {
            info.fits(&spec.limits, max)?;
            return Ok(Worker::new(self, spec, info, digest, stamp, Checked::Recorded));
        }
        let (worker, code) = self.compile_worker(spec, &wasm, digest, stamp)?;
        worker.trial_of(&code).await?;
        if !precompiled {
            resident.loader.record_checked(&digest, &worker.inner.info);
        }
        resident.keep(digest, code);
        Ok(worker)
    }

    /// Worker `spec` as `previous` was checked, without looking at its module again, if it
    /// names the same source (else [`Runtime::prepare`]). A deploy of one worker carries the
    /// others over so: their files are looked at again by a reload, not by a deploy.
    pub async fn carry(
        &self,
        spec: WorkerSpec<'_>,
        previous: &Worker,
    ) -> Result<Worker, LoadError> {
        if spec.source.names(&previous.inner.source) {
            return self.unchanged(spec, previous);
        }
        self.prepare(spec, Some(previous)).await
    }

    /// Worker `spec`, whose module is `previous`'s: its limits checked against the module.
    fn unchanged(&self, spec: WorkerSpec<'_>, previous: &Worker) -> Result<Worker, LoadError> {
        let previous = &*previous.inner;
        previous.info.fits(&spec.limits, self.config().max_memory)?;
        let (info, digest, stamp) = (previous.info.clone(), previous.digest, previous.stamp);
        Ok(Worker::new(self, spec, info, digest, stamp, Checked::Unchanged))
    }
}

/// Refuses `wasm` unless it is binary Wasm, or `spec` accepts native code and it is a
/// `.cwasm`. Checked where a worker's bytes are first read: later reads (after an eviction)
/// must hash to the same digest, so they are the same bytes.
fn admit(spec: &WorkerSpec<'_>, wasm: &[u8]) -> Result<(), LoadError> {
    match crate::code::compiled::binary_wasm(wasm) {
        Err(LoadError::NotWasm { native: true }) if spec.native_code => Ok(()),
        checked => checked,
    }
}

impl Worker {
    fn new(
        runtime: &Runtime,
        spec: WorkerSpec<'_>,
        info: ModuleInfo,
        digest: Digest,
        stamp: Option<Stamp>,
        checked: Checked,
    ) -> Self {
        let config_block = edgegate_abi::encode_entries(
            spec.config.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
        );
        let cpu_ticks = cpu_ticks(spec.limits.cpu, runtime.config().epoch_tick);
        let jwt = edgegate_sdk::jwt::Validation::from_pairs(
            spec.config.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let shared = Arc::new(WorkerShared {
            name: spec.name.to_owned(),
            limits: spec.limits,
            config: spec.config,
            config_block,
            keys: spec.keys,
            jwt,
            kv: spec.kv,
            fetcher: spec.fetcher,
            image: spec.image.map(|grant| {
                Arc::new(crate::capability::image::ImageShared::new(
                    grant,
                    runtime.image_threads().clone(),
                ))
            }),
            wall_clock: runtime.config().wall_clock,
            cpu_ticks,
            epoch_tick: runtime.config().epoch_tick,
            activity: runtime.activity().clone(),
        });
        let resident = runtime.resident().clone();
        resident.add_user(&digest);
        let source = spec.source;
        let inner = Inner { shared, info, digest, source, stamp, resident, checked };
        Self { inner: Arc::new(inner) }
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

    /// Where its module comes from.
    pub fn source(&self) -> &Source {
        &self.inner.source
    }

    /// What the module speaks and needs.
    pub fn module_info(&self) -> &ModuleInfo {
        &self.inner.info
    }

    /// How it was checked when it was loaded.
    pub fn checked(&self) -> &Checked {
        &self.inner.checked
    }

    /// Whether the worker's code is in memory now.
    pub fn is_resident(&self) -> bool {
        self.inner.resident.contains(&self.inner.digest)
    }

    /// Instantiates the module once, as a request would (a fresh store within the worker's
    /// limits, a slot of the pool), and drops it without calling the guest: what a reload
    /// checks before it puts a new module in service. Loads the code if it is not resident.
    pub async fn trial(&self) -> Result<(), LoadError> {
        let code = self.code().await.map_err(|e| LoadError::Trial(wasmtime::format_err!("{e}")))?;
        self.trial_of(&code).await
    }

    async fn trial_of(&self, code: &Code) -> Result<(), LoadError> {
        let shared = &self.inner.shared;
        match &code.entry {
            Entry::Core { pre, .. } => request::trial(shared, pre).await,
            Entry::Component(pre) => crate::component::trial(shared, pre).await,
        }
        .map_err(LoadError::Trial)
    }

    /// The worker's code: resident, or loaded now.
    async fn code(&self) -> Result<Arc<Code>, Arc<LoadError>> {
        let inner = &*self.inner;
        inner.resident.code(&inner.digest, inner.info.abi, &inner.source).await
    }

    /// The first 12 hex digits of the module's sha256: short enough for every log line.
    pub fn short_digest(&self) -> &str {
        &self.inner.info.digest[..12]
    }

    /// Serves one request in a fresh instance, dropped before this returns.
    ///
    /// Hot path: one look-up of the resident code, one store, one instantiation from the
    /// pool, one call, one copy of the response body out of guest memory.
    pub async fn handle(
        &self,
        request: GuestRequest,
        id: RequestId,
    ) -> Result<GuestOutcome, ExecError> {
        self.handle_measured(request, id).await.0
    }

    /// [`handle`](Self::handle), and what the request cost: loading the code (if it was not
    /// resident), instantiation, guest wall and CPU time, peak memory. The gateway's logs,
    /// metrics and `server-timing` come from it.
    pub async fn handle_measured(
        &self,
        request: GuestRequest,
        id: RequestId,
    ) -> (Result<GuestOutcome, ExecError>, Usage) {
        let inner = &*self.inner;
        let (code, load) = match inner.resident.resident(&inner.digest) {
            Some(code) => (code, std::time::Duration::ZERO),
            None => match self.load_for_request().await {
                Ok(loaded) => loaded,
                Err(error) => return (Err(error), Usage::default()),
            },
        };
        let (outcome, usage) = match &code.entry {
            Entry::Core { pre, handle, memory, waits } => {
                let fiber = *waits || inner.shared.limits.cpu > request::MAX_FIBERLESS_CPU;
                let target = Target { shared: &inner.shared, pre, handle, memory, fiber };
                request::run(target, request, id).await
            }
            Entry::Component(pre) => crate::component::run(&inner.shared, pre, request, id).await,
        };
        (outcome, Usage { load, ..usage })
    }

    /// Waits for the code of a worker that is not resident, within the worker's deadline.
    async fn load_for_request(&self) -> Result<(Arc<Code>, std::time::Duration), ExecError> {
        let started = std::time::Instant::now();
        let deadline = self.inner.shared.limits.deadline;
        match tokio::time::timeout(deadline, self.code()).await {
            Ok(Ok(code)) => Ok((code, started.elapsed())),
            Ok(Err(error)) => {
                let detail = format!("{:#}", anyhow::Error::from(Cause(error)));
                Err(ExecError::new(ExecErrorKind::Unloadable, detail))
            }
            Err(_) => Err(ExecError::new(
                ExecErrorKind::DeadlineExceeded,
                "the worker's code was still loading at its deadline",
            )),
        }
    }
}

/// A shared load error, as an error with its chain of causes.
#[derive(Debug)]
struct Cause(Arc<LoadError>);

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

/// The budget in epoch ticks, rounded up, at least 1.
fn cpu_ticks(budget: std::time::Duration, tick: std::time::Duration) -> u32 {
    let ticks = budget.as_nanos().div_ceil(tick.as_nanos().max(1));
    u32::try_from(ticks).unwrap_or(u32::MAX).max(1)
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
