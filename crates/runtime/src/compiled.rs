//! What a worker's bytes compile to: a core module, which speaks edgegate's own ABI, or a
//! component, which serves `wasi:http/proxy` (crate::component). The bytes say which: a
//! component's header has the component layer, a module's does not.

use wasmtime::component::Component;
use wasmtime::{Engine, Module, Precompiled};

/// The two ABIs a worker can speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
