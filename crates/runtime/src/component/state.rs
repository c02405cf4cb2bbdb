//! What a component's [`Store`](wasmtime::Store) carries for one request: the WASI and
//! wasi-http contexts and their resource table, the outbound hooks, the guest's captured
//! stdout and stderr, the same [`Meter`] a module's request has (its limiter too), and the count of what it
//! holds in host memory ([`Held`]).
//!
//! After every host call the request's limits are checked again ([`ComponentState::returned`]):
//! its deadline, its CPU budget (the host's work for the guest counts, and a long host call
//! is stopped when it returns, not only at the guest's next epoch check), and its memory, the
//! host's share included.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::body::{HostOutgoingBody, StreamContext};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::held::{Held, MAX_FIELDS_SIZE, MAX_RANDOM, MAX_RESOURCES};
use super::outbound::Outbound;
use crate::guest::{RequestId, WorkerShared};
use crate::limits::cpu;
use crate::limits::meter::{Meter, Stop};
use crate::limits::usage::Progress;

/// How much of its stdout and of its stderr a request may write; past it, the stream is
/// closed to the guest (a write fails; nothing traps).
const MAX_OUTPUT: usize = 16 << 10;

/// One request's store data.
pub(crate) struct ComponentState {
    pub(crate) worker: Arc<WorkerShared>,
    pub(crate) request_id: RequestId,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    pub(super) table: ResourceTable,
    outbound: Outbound,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
    pub(crate) meter: Meter,
    /// What the request has used so far, shared with its streamed answer.
    pub(crate) progress: Arc<Progress>,
    /// What the resource table holds in host memory.
    held: Held,
}

impl ComponentState {
    pub(crate) fn new(
        worker: Arc<WorkerShared>,
        request_id: RequestId,
        deadline: Instant,
        progress: Arc<Progress>,
    ) -> Self {
        let stdout = MemoryOutputPipe::new(MAX_OUTPUT);
        let stderr = MemoryOutputPipe::new(MAX_OUTPUT);
        // No environment, arguments, preopens or sockets; stdin is closed; clocks and
        // randomness are the host's.
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(WallClock(worker.wall_clock))
            .max_random_size(MAX_RANDOM)
            .build();
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(MAX_FIELDS_SIZE);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let limits = &worker.limits;
        let outbound = Outbound::new(
            worker.fetcher.clone(),
            limits.subrequests,
            limits.subrequest_body,
            progress.clone(),
        );
        Self {
            request_id,
            wasi,
            http,
            table,
            outbound,
            stdout,
            stderr,
            meter: Meter::new(deadline, crate::limits::meter::COMPONENT, worker.limits.memory)
                .telling(progress.clone()),
            progress,
            held: Held::default(),
            worker,
        }
    }

    /// Aborts every outgoing body (a response's or an outbound request's) the guest neither
    /// finished nor dropped, before the store goes: dropped with it, such a body would end as
    /// if complete, and a truncated answer would pass for a whole one. Returns how many.
    pub(crate) fn abort_unfinished_bodies(&mut self) -> usize {
        let mut aborted = 0;
        for entry in self.table.iter_mut() {
            if let Some(body) = entry.downcast_mut::<HostOutgoingBody>() {
                let (spent, _) = HostOutgoingBody::new(StreamContext::Response, None, 1, 1);
                std::mem::replace(body, spent).abort();
                aborted += 1;
            }
        }
        aborted
    }

    /// After each host call: past the deadline, over the CPU budget, or holding more memory
    /// (linear and host together) than the limit, the guest is stopped here.
    pub(crate) fn returned(&mut self) -> wasmtime::Result<()> {
        let now = Instant::now();
        let stop = if now >= self.meter.deadline() {
            Some(Stop::Deadline)
        } else if cpu::over(now, self.worker.limits.cpu) {
            Some(Stop::Cpu)
        } else {
            None
        };
        if let Some(stop) = stop {
            self.meter.stop = Some(stop);
            return Err(wasmtime::format_err!("stopped after a host call: {stop:?}"));
        }
        let memory = self.meter.memory();
        let room = self.worker.limits.memory.saturating_sub(memory);
        let checked = self.held.check(&mut self.table, room);
        self.meter.held = self.held.counted();
        if let Err(held) = checked {
            self.meter.memory_refused = true;
            return Err(wasmtime::format_err!(
                "the component holds {held} bytes in the host, with {} of linear memory: \
                 over its memory limit of {} bytes",
                memory,
                self.worker.limits.memory
            ));
        }
        Ok(())
    }

    /// Counts one call into the host; past the worker's budget, records the stop and
    /// returns the trap to raise.
    pub(crate) fn charge_hostcall(&mut self) -> wasmtime::Result<()> {
        self.meter.hostcall(self.worker.limits.hostcalls)
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
