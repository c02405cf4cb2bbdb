//! The runtime's errors: [`LoadError`] when a module cannot become a worker, [`ExecError`]
//! when a request to a worker fails.

use std::fmt;

/// Why a module was refused when loading it as a worker.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The module compiled and linked, but instantiating it failed (a pool slot too small
    /// for it, a start function that traps).
    #[error("instantiating it once failed")]
    Trial(#[source] wasmtime::Error),
    /// The bytes are not a valid WebAssembly module, or Cranelift could not compile them.
    #[error("not a valid WebAssembly module")]
    Compile(#[source] wasmtime::Error),
    /// The bytes do not start with the binary Wasm header of a module or a component, where
    /// only Wasm is taken (the admin API, a registry): a `.cwasm` (native code), WAT text or
    /// anything else.
    #[error("{}", if *native {
        "a precompiled .cwasm is native code, which runs outside the Wasm sandbox: only binary \
         Wasm (a module or a component) is taken here; deploy the .wasm, edgegate compiles it"
    } else {
        "not binary WebAssembly: a module or a component starts with the bytes \\0asm and a \
         version"
    })]
    NotWasm {
        /// Whether they are a `.cwasm`.
        native: bool,
    },
    /// The module speaks another ABI version.
    #[error(
        "built for edgegate ABI v{found}, but this gateway speaks v{supported}; \
         rebuild the worker with an edgegate-sdk for ABI v{supported}"
    )]
    AbiVersion {
        /// The version the module's exports name.
        found: u32,
        /// The version this gateway implements.
        supported: u32,
    },
    /// The module has no entry point at all.
    #[error("not an edgegate worker: it exports no `{}` function", edgegate_abi::EXPORT_HANDLE)]
    NoEntryPoint,
    /// An export has the wrong type.
    #[error("export `{name}` must be {expected}")]
    BadExport {
        /// The export.
        name: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// The module's initial memory exceeds the worker's memory limit.
    #[error(
        "the module starts with {needed} bytes of memory, more than its limit of {limit} bytes"
    )]
    InitialMemory {
        /// Bytes of initial memory.
        needed: u64,
        /// The worker's limit.
        limit: u64,
    },
    /// The worker's memory limit exceeds what the runtime's instance pool was sized for.
    #[error("memory limit of {limit} bytes exceeds the runtime's maximum of {max} bytes")]
    MemoryLimitTooLarge {
        /// The worker's limit.
        limit: u64,
        /// The runtime's `max_memory`.
        max: u64,
    },
    /// The module imports something the gateway does not provide.
    #[error("cannot link the module's imports")]
    Link(#[source] wasmtime::Error),
    /// The module imports a function that is not part of the ABI.
    #[error(
        "imports `{0}`, which this gateway does not provide (ABI v{abi} has: {all})",
        abi = edgegate_abi::ABI_VERSION,
        all = edgegate_abi::imports::ALL.join(", ")
    )]
    UnknownImport(String),
    /// A component imports an interface outside the `wasi:http/proxy` world edgegate links.
    #[error(
        "imports `{0}`, which this gateway does not provide to components (it links: {all})",
        all = crate::component::provided::PROVIDED.join(", ")
    )]
    UnknownComponentImport(String),
    /// A component would allocate more than one instance slot holds.
    #[error("the component needs {needed} {what}; a worker may have at most {cap}")]
    ComponentTooLarge {
        /// What there are too many of.
        what: &'static str,
        /// How many it needs.
        needed: usize,
        /// How many a worker may have.
        cap: usize,
    },
    /// A component that does not export `wasi:http/incoming-handler`.
    #[error("not a wasi:http/proxy component: it must export `wasi:http/incoming-handler`")]
    NotAProxy(#[source] wasmtime::Error),
    /// The module's file cannot be read.
    #[error("cannot read `{}`", path.display())]
    Unreadable {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The module's file changed after the worker was checked, and the module cache has no
    /// code for the version checked: a reload checks the new one.
    #[error(
        "`{}` changed since the worker was checked, and the module cache has no code for the checked version: reload to serve the new file",
        path.display()
    )]
    Changed {
        /// The file.
        path: std::path::PathBuf,
    },
    /// A pulled module's stored file is not the module it was pulled as.
    #[error(
        "`{}` is not the module pulled as sha256:{expected}: the store of pulled modules was altered; remove the file to pull it again",
        path.display()
    )]
    NotPulled {
        /// The file.
        path: std::path::PathBuf,
        /// The digest it was pulled by, in hex.
        expected: String,
    },
    /// The runtime is shutting down: its blocking pool is gone.
    #[error("the runtime is shutting down")]
    Closed,
    /// A precompiled module (`.cwasm`) this gateway cannot load.
    #[error(
        "a precompiled module built by another edgegate version or with other engine settings: compile it again with `edgegate compile` from this binary and configuration"
    )]
    Precompiled(#[source] wasmtime::Error),
}

/// What went wrong in one request to a worker. The host turns the kind into a status code, a
/// metric label and a log level; the detail goes to the log only.
#[derive(Debug)]
pub struct ExecError {
    kind: ExecErrorKind,
    detail: String,
}

impl ExecError {
    pub(crate) fn new(kind: ExecErrorKind, detail: impl Into<String>) -> Self {
        Self { kind, detail: detail.into() }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ExecErrorKind {
        self.kind
    }

    /// Detail for the log (a trap message, the guest's own message): never for the client.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{}", self.kind.code())
        } else {
            write!(f, "{}: {}", self.kind.code(), self.detail)
        }
    }
}

impl std::error::Error for ExecError {}

/// The kinds of request failure. All are the worker's doing except [`ExecErrorKind::Capacity`]
/// [`ExecErrorKind::Unloadable`] and [`ExecErrorKind::Internal`], which are the host's.
///
/// Not `#[non_exhaustive]`, on purpose: the host maps every kind to a status with an
/// exhaustive `match`, so a new kind cannot quietly become a 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecErrorKind {
    /// The guest trapped (`unreachable`, a panic, an out-of-bounds access, …).
    Trap,
    /// The guest overflowed its stack.
    StackOverflow,
    /// The guest trapped after the memory limit refused it more memory.
    OutOfMemory,
    /// The guest used up its CPU time budget.
    CpuBudgetExceeded,
    /// The request ran past its wall-clock deadline.
    DeadlineExceeded,
    /// The guest made more host calls than its budget allows.
    HostcallBudgetExceeded,
    /// The guest broke the ABI: a bad outcome pointer or buffer, or a malformed request_read.
    AbiViolation,
    /// The guest's response cannot be sent: an invalid status, header name or value.
    InvalidResponse,
    /// The guest's response body exceeds its limit.
    ResponseTooLarge,
    /// The guest reported a failure ([`edgegate_abi::outcome::ErrorCode::Internal`] or
    /// [`edgegate_abi::outcome::ErrorCode::BadRequestBuffer`]).
    WorkerFailed,
    /// The guest reported it cannot serve now
    /// ([`edgegate_abi::outcome::ErrorCode::Unavailable`]).
    WorkerUnavailable,
    /// No instance slot was free (the host's concurrency limit should prevent this).
    Capacity,
    /// The worker's code could not be loaded (its file changed or went, and the module cache
    /// has no code for the version checked): the deployment's fault, not the request's.
    Unloadable,
    /// Anything else in the host.
    Internal,
}

impl ExecErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 14] = [
        Self::Trap,
        Self::StackOverflow,
        Self::OutOfMemory,
        Self::CpuBudgetExceeded,
        Self::DeadlineExceeded,
        Self::HostcallBudgetExceeded,
        Self::AbiViolation,
        Self::InvalidResponse,
        Self::ResponseTooLarge,
        Self::WorkerFailed,
        Self::WorkerUnavailable,
        Self::Capacity,
        Self::Unloadable,
        Self::Internal,
    ];

    /// The stable code used in error bodies, logs and metric labels.
    pub fn code(self) -> &'static str {
        match self {
            Self::Trap => "worker_trap",
            Self::StackOverflow => "stack_overflow",
            Self::OutOfMemory => "out_of_memory",
            Self::CpuBudgetExceeded => "cpu_budget_exceeded",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::HostcallBudgetExceeded => "hostcall_budget_exceeded",
            Self::AbiViolation => "abi_violation",
            Self::InvalidResponse => "invalid_response",
            Self::ResponseTooLarge => "response_too_large",
            Self::WorkerFailed => "worker_error",
            Self::WorkerUnavailable => "worker_unavailable",
            Self::Capacity => "overloaded",
            Self::Unloadable => "worker_unloadable",
            Self::Internal => "internal_error",
        }
    }

    /// Whether the host, not the worker, is the source of this failure.
    pub fn is_host(self) -> bool {
        match self {
            Self::Capacity | Self::Unloadable | Self::Internal => true,
            Self::Trap
            | Self::StackOverflow
            | Self::OutOfMemory
            | Self::CpuBudgetExceeded
            | Self::DeadlineExceeded
            | Self::HostcallBudgetExceeded
            | Self::AbiViolation
            | Self::InvalidResponse
            | Self::ResponseTooLarge
            | Self::WorkerFailed
            | Self::WorkerUnavailable => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ExecErrorKind;

    /// [`ExecErrorKind::ALL`] lists every kind once: a new kind needs an arm here, and then
    /// this fails until `ALL` has it too.
    #[test]
    fn all_lists_every_kind() {
        let position = |kind: ExecErrorKind| match kind {
            ExecErrorKind::Trap => 0,
            ExecErrorKind::StackOverflow => 1,
            ExecErrorKind::OutOfMemory => 2,
            ExecErrorKind::CpuBudgetExceeded => 3,
            ExecErrorKind::DeadlineExceeded => 4,
            ExecErrorKind::HostcallBudgetExceeded => 5,
            ExecErrorKind::AbiViolation => 6,
            ExecErrorKind::InvalidResponse => 7,
            ExecErrorKind::ResponseTooLarge => 8,
            ExecErrorKind::WorkerFailed => 9,
            ExecErrorKind::WorkerUnavailable => 10,
            ExecErrorKind::Capacity => 11,
            ExecErrorKind::Unloadable => 12,
            ExecErrorKind::Internal => 13,
        };
        let positions: Vec<usize> = ExecErrorKind::ALL.into_iter().map(position).collect();
        assert_eq!(positions, (0..ExecErrorKind::ALL.len()).collect::<Vec<_>>());
    }
}
