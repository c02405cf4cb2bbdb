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

mod capability;
mod code;
mod component;
mod core_abi;
mod engine;
mod error;
mod guest;
mod limits;
mod outcome;
mod runtime;
mod span;
mod worker;

#[cfg(test)]
mod tests;

pub use capability::fetch::{FetchError, FetchFuture, Fetcher};
pub use capability::image::ImageGrant;
pub use capability::keys::Keys;
pub use capability::{fetch, keys, token};
pub use code::compiled::{Abi, ModuleInfo, binary_wasm};
pub use code::module_cache::{
    CacheOutcome, ModuleCache, PULLED_MODULES, Pruned, Pruning, module_digest,
};
pub use code::prune::PRUNE_INTERVAL;
pub use code::resident::ResidentStats;
pub use code::source::{Source, Stamp};
pub use component::provides as component_provides;
pub use engine::{BoundsChecks, RuntimeConfig};
pub use error::{ExecError, ExecErrorKind, LoadError};
pub use guest::{Forward, GuestOutcome, GuestRequest, HeaderEdit, RequestId, StreamedBody};
pub use limits::Limits;
pub use limits::units::{self, ByteSize};
pub use limits::usage::{Progress, Usage};
pub use runtime::Runtime;
pub use span::SPAN_TARGET;
pub use worker::{Checked, Worker, WorkerSpec};
