//! A module's code linked and ready to instantiate: how a request enters a core module
//! (`edgegate_v1_handle`) or a component (`wasi:http/incoming-handler`), after checking it
//! speaks its ABI.

use edgegate_abi::{ABI_VERSION, EXPORT_HANDLE, EXPORT_MEMORY};
use wasmtime::{ExternType, InstancePre, Linker, Module, ModuleExport, ValType};
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use crate::code::compiled::{Abi, Compiled, ModuleInfo};
use crate::code::module_cache::CacheOutcome;
use crate::component::ComponentState;
use crate::core_abi::request::RequestState;
use crate::error::LoadError;

/// The linkers of both ABIs.
pub(crate) struct Linkers<'a> {
    pub(crate) core: &'a Linker<RequestState>,
    pub(crate) component: &'a wasmtime::component::Linker<ComponentState>,
}

/// A module's code, linked and ready to instantiate.
pub(crate) struct Code {
    pub(crate) entry: Entry,
    /// Where it came from this time.
    pub(crate) cache: CacheOutcome,
}

/// How a request enters a worker.
pub(crate) enum Entry {
    /// A core module's `edgegate_v1_handle`. `waits`: whether it imports a host function
    /// that may wait (`crate::core_abi::hostcalls::ASYNC`), so that its calls need a fiber.
    Core { pre: InstancePre<RequestState>, handle: ModuleExport, memory: ModuleExport, waits: bool },
    /// A component's `wasi:http/incoming-handler`.
    Component(ProxyPre<ComponentState>),
}

/// Checks `compiled` (from `wasm`, when at hand) against its ABI and links it: its entry,
/// and what it speaks and needs.
pub(crate) fn link(
    linkers: &Linkers<'_>,
    compiled: &Compiled,
    wasm: Option<&[u8]>,
    digest: &[u8; 32],
) -> Result<(Entry, ModuleInfo), LoadError> {
    let digest = crate::code::module_cache::hex(digest);
    match compiled {
        Compiled::Module(module) => core_entry(linkers.core, module, digest),
        Compiled::Component(component) => {
            let (pre, imports, needs) = crate::component::load(linkers.component, component, wasm)?;
            let info = ModuleInfo {
                abi: Abi::HttpComponent,
                imports,
                initial_memory: needs.initial_memory,
                maximum_memory: None,
                digest,
            };
            Ok((Entry::Component(pre), info))
        }
    }
}

/// A core module's entry and what it speaks, after checking it speaks ABI v1 and imports
/// only the ABI's host functions.
fn core_entry(
    linker: &Linker<RequestState>,
    module: &Module,
    digest: String,
) -> Result<(Entry, ModuleInfo), LoadError> {
    check_exports(module)?;
    if let Some(import) =
        module.imports().find(|i| !edgegate_abi::imports::provided(i.module(), i.name()))
    {
        return Err(LoadError::UnknownImport(format!("{}::{}", import.module(), import.name())));
    }
    let info = ModuleInfo::of(module, digest);
    let pre = linker.instantiate_pre(module).map_err(LoadError::Link)?;
    let export = |name| module.get_export_index(name).ok_or(LoadError::NoEntryPoint);
    let handle = export(EXPORT_HANDLE)?;
    let memory = export(EXPORT_MEMORY)?;
    let waits = module.imports().any(|i| crate::core_abi::hostcalls::ASYNC.contains(&i.name()));
    Ok((Entry::Core { pre, handle, memory, waits }, info))
}

/// Checks the exports against ABI v1.
fn check_exports(module: &Module) -> Result<(), LoadError> {
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
    Ok(())
}
