//! What a worker's bytes compile to: a core module, which speaks edgegate's own ABI, or a
//! component, which serves `wasi:http/proxy` (crate::component). The bytes say which: a
//! component's header has the component layer, a module's does not. [`ModuleInfo`] is what
//! the check of either found.

use edgegate_abi::EXPORT_MEMORY;
use wasmtime::component::Component;
use wasmtime::{Engine, ExternType, Module, Precompiled};

use crate::error::LoadError;
use crate::limits::Limits;

/// The two ABIs a worker can speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Abi {
    /// A core module exporting `edgegate_v1_handle`: edgegate's zero-copy ABI.
    Core,
    /// A component exporting `wasi:http/incoming-handler`: the standard proxy world.
    HttpComponent,
}

impl Abi {
    /// The ABI of `wasm` (binary Wasm or a `.cwasm`), from its header alone.
    pub fn of(wasm: &[u8]) -> Self {
        match Engine::detect_precompiled(wasm) {
            Some(Precompiled::Component) => Self::HttpComponent,
            Some(Precompiled::Module) => Self::Core,
            None if wasmparser::Parser::is_component(wasm) => Self::HttpComponent,
            None => Self::Core,
        }
    }
}

impl std::fmt::Display for Abi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Core => write!(f, "edgegate ABI v{}", edgegate_abi::ABI_VERSION),
            Self::HttpComponent => f.write_str("wasi:http/proxy component"),
        }
    }
}

/// Whether `bytes` start as binary Wasm does, a core module's header or a component's:
/// [`LoadError::NotWasm`] if not, saying whether they are a `.cwasm` (native code). What the
/// admin API checks an upload with before it writes it, and the runtime every worker whose
/// bytes may not be native code.
pub fn binary_wasm(bytes: &[u8]) -> Result<(), LoadError> {
    if wasmparser::Parser::is_core_wasm(bytes) || wasmparser::Parser::is_component(bytes) {
        return Ok(());
    }
    Err(LoadError::NotWasm { native: Engine::detect_precompiled(bytes).is_some() })
}

/// Compiled code of either ABI.
#[derive(Clone)]
pub(crate) enum Compiled {
    Module(Module),
    Component(Component),
}

impl Compiled {
    /// Compiles `wasm` with Cranelift.
    pub(crate) fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Self> {
        match Abi::of(wasm) {
            Abi::Core => Module::new(engine, wasm).map(Self::Module),
            Abi::HttpComponent => Component::new(engine, wasm).map(Self::Component),
        }
    }

    /// The bytes [`Compiled::deserialize`] takes back.
    pub(crate) fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        match self {
            Self::Module(module) => module.serialize(),
            Self::Component(component) => component.serialize(),
        }
    }

    /// Code from `bytes`, a [`Compiled::serialize`] or `precompile_*` output of `abi`.
    ///
    /// # Safety
    ///
    /// `bytes` runs as machine code: it must come from this crate's own serialization (the
    /// module cache, whose entries carry a checksum) or from a `.cwasm` the operator
    /// deployed, trusted like this binary. Wasmtime refuses output of another version or
    /// configuration.
    pub(crate) unsafe fn deserialize(
        engine: &Engine,
        bytes: &[u8],
        abi: Abi,
    ) -> wasmtime::Result<Self> {
        // SAFETY: the caller's contract, above.
        unsafe {
            match abi {
                Abi::Core => Module::deserialize(engine, bytes).map(Self::Module),
                Abi::HttpComponent => Component::deserialize(engine, bytes).map(Self::Component),
            }
        }
    }
}

/// What a loaded module speaks and needs (all of it checked when it was loaded).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    pub(crate) fn of(module: &Module, digest: String) -> Self {
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

    /// Checks that a worker with `limits` can run this module in a pool slot of `max` bytes.
    pub(crate) fn fits(&self, limits: &Limits, max: u64) -> Result<(), LoadError> {
        if limits.memory > max {
            return Err(LoadError::MemoryLimitTooLarge { limit: limits.memory, max });
        }
        if self.initial_memory > limits.memory {
            return Err(LoadError::InitialMemory {
                needed: self.initial_memory,
                limit: limits.memory,
            });
        }
        Ok(())
    }
}
