//! What a component's [`Store`](wasmtime::Store) carries for one request: the WASI and
//! wasi-http contexts and their resource table, the outbound hooks, the guest's captured
//! stdout and stderr, and the same [`Meter`] a module's request has.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::outbound::Outbound;
use crate::meter::Meter;
use crate::request::{RequestId, Usage, WorkerShared};

/// How much of its stdout and of its stderr a request may write; past it, the stream is
/// closed to the guest (a write fails; nothing traps).
const MAX_OUTPUT: usize = 16 << 10;

/// The core instances, tables and memories one component instance may have. A Rust
/// component built by `wit-component` has 3 instances (the module, a shim and its fixups) and
/// 2 tables; with a preview1 adapter, 4 instances.
pub(crate) const MAX_INSTANCES: usize = 8;
pub(crate) const MAX_TABLES: usize = 4;
pub(crate) const MAX_MEMORIES: usize = 2;

/// A guest may grow a table this far (Rust modules start with a few hundred).
const MAX_TABLE_ELEMENTS: usize = 10_000;

/// One request's store data.
pub(crate) struct ComponentState {
    pub(crate) worker: Arc<WorkerShared>,
    pub(crate) request_id: RequestId,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    outbound: Outbound,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
    pub(crate) meter: Meter,
    pub(crate) usage: Usage,
    /// Bytes of linear memory, all memories together, and the most there has been.
    memory: u64,
}

impl ComponentState {
    pub(crate) fn new(worker: Arc<WorkerShared>, request_id: RequestId, deadline: Instant) -> Self {
        let stdout = MemoryOutputPipe::new(MAX_OUTPUT);
        let stderr = MemoryOutputPipe::new(MAX_OUTPUT);
        // No environment, arguments, preopens or sockets; stdin is closed; clocks and
        // randomness are the host's.
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(WallClock(worker.wall_clock))
            .build();
        let limits = &worker.limits;
        let outbound =
            Outbound::new(worker.fetcher.clone(), limits.subrequests, limits.subrequest_body);
        Self {
            request_id,
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            outbound,
            stdout,
            stderr,
            meter: Meter::new(deadline),
            usage: Usage::default(),
            memory: 0,
            worker,
        }
    }

    /// Counts one call into the host; past the worker's budget, records the stop and
    /// returns the trap to raise.
    pub(crate) fn charge_hostcall(&mut self) -> wasmtime::Result<()> {
        self.meter.hostcall(self.worker.limits.hostcalls)
    }

    /// The most linear memory the instance has had, all memories together.
    pub(crate) fn memory_peak(&self) -> u64 {
        self.memory
    }
}

impl WasiView for ComponentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for ComponentState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.outbound }
    }
}

impl ResourceLimiter for ComponentState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // The worker's limit bounds all of the instance's memories together.
        let total = self.memory - current as u64 + desired as u64;
        let allowed = self.meter.grow(total, self.worker.limits.memory);
        if allowed {
            self.memory = total;
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// The runtime's wall clock (a test may pin it), as WASI's.
struct WallClock(fn() -> std::time::SystemTime);

impl wasmtime_wasi::HostWallClock for WallClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(1)
    }

    fn now(&self) -> std::time::Duration {
        (self.0)().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
    }
}
