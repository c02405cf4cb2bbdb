//! What turns a worker's bytes into code it can run: the engines of both ABIs, their linkers,
//! and the module cache. The [`Resident`](super::resident::Resident) set keeps what it makes.

use wasmtime::{Engine, Linker};

use crate::code::Digest;
use crate::code::compiled::{Abi, Compiled, ModuleInfo};
use crate::code::entry::Linkers;
use crate::code::module_cache::{CacheOutcome, ModuleCache};
use crate::code::source::Source;
use crate::component::ComponentState;
use crate::core_abi::request::RequestState;
use crate::engine::Engines;
use crate::error::LoadError;

/// The engines, the linkers and the module cache.
pub(crate) struct Loader {
    pub(crate) engines: Engines,
    pub(crate) linker: Linker<RequestState>,
    pub(crate) component_linker: wasmtime::component::Linker<ComponentState>,
    pub(crate) cache: Option<ModuleCache>,
}

impl Loader {
    /// The linkers, for [`crate::code::entry::link`].
    pub(crate) fn linkers(&self) -> Linkers<'_> {
        Linkers { core: &self.linker, component: &self.component_linker }
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
    /// is ([`Loader::compiled`], which says whether a cache entry was refused).
    pub(crate) fn compiled_again(
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
    pub(crate) fn label(&self, outcome: &CacheOutcome) -> &'static str {
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
