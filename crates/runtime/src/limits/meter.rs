//! What stops a running guest, module or component alike: its CPU budget and its deadline,
//! checked at every epoch tick, its memory limit when it grows (the [`Meter`] is both ABIs'
//! one [`ResourceLimiter`]), its host call budget, and the record of why the runtime stopped
//! it, so that the trap that follows is told apart from the guest's own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, Trap, UpdateDeadline};

use crate::error::{ExecError, ExecErrorKind};
use crate::limits::Limits;
use crate::limits::cpu;
use crate::limits::usage::Progress;

/// How many core instances, tables and memories one store may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) instances: usize,
    pub(crate) tables: usize,
    pub(crate) memories: usize,
}

/// A core module's: one of each.
pub(crate) const MODULE: Shape = Shape { instances: 1, tables: 1, memories: 1 };

/// A component's. A Rust component built by `wit-component` has 3 instances (the module, a
/// shim and its fixups) and 2 tables; with a preview1 adapter, 4 instances. The instance
/// pool is sized for these.
pub(crate) const COMPONENT: Shape = Shape { instances: 8, tables: 4, memories: 2 };

/// A guest may grow a table this far (Rust modules start with a few hundred).
const MAX_TABLE_ELEMENTS: usize = 10_000;

/// Why the runtime stopped a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Cpu,
    Deadline,
    Hostcalls,
}

/// The context of an error a host call raised during a component's call that is no stop of
/// the runtime's: WASI and wasi-http fail a host call so only for what the guest asked (a
/// resource it does not hold, random bytes over the cap, a full resource table), so the
/// failure is the guest's, as a trap is.
#[derive(Debug, thiserror::Error)]
#[error("a host call refused what the guest asked")]
pub(crate) struct Refused;

/// One request's meter.
#[derive(Debug)]
pub(crate) struct Meter {
    /// Why the runtime stopped the guest, if it did.
    pub(crate) stop: Option<Stop>,
    /// A `memory.grow` was refused for the limit.
    pub(crate) memory_refused: bool,
    /// Epoch ticks the guest has been seen running at.
    ticks_seen: u32,
    /// Calls into the host so far.
    hostcalls: u32,
    /// KV operations so far (a batch counts each key).
    kv_ops: u32,
    deadline: Instant,
    /// The store's shape.
    shape: Shape,
    /// The worker's memory limit: linear memories and what the host holds together.
    memory_limit: u64,
    /// Bytes of linear memory, all memories together: the peak, as Wasm memory only grows.
    memory: u64,
    /// Bytes the host holds for the guest (a component's resources), last counted.
    pub(crate) held: u64,
    /// Whether the guest runs on a fiber, so that a tick can yield it to other tasks.
    yields: bool,
    /// Where a streaming guest's memory and KV operations are told as they happen (a
    /// component's), so that they are known if its store is dropped mid-stream.
    progress: Option<Arc<Progress>>,
}

impl Meter {
    /// A meter for a guest on a fiber: each tick that does not stop it yields it.
    pub(crate) fn new(deadline: Instant, shape: Shape, memory_limit: u64) -> Self {
        Self::with_yields(deadline, shape, memory_limit, true)
    }

    /// A meter that yields the guest at ticks only if `yields` (it runs on a fiber); a guest
    /// called without one is let run until it ends or a limit stops it.
    pub(crate) fn with_yields(
        deadline: Instant,
        shape: Shape,
        memory_limit: u64,
        yields: bool,
    ) -> Self {
        Self {
            stop: None,
            memory_refused: false,
            ticks_seen: 0,
            hostcalls: 0,
            kv_ops: 0,
            deadline,
            shape,
            memory_limit,
            memory: 0,
            held: 0,
            yields,
            progress: None,
        }
    }

    /// This meter, telling `progress` what it counts as it counts it.
    pub(crate) fn telling(mut self, progress: Arc<Progress>) -> Self {
        self.progress = Some(progress);
        self
    }

    /// KV operations so far.
    pub(crate) fn kv_ops(&self) -> u32 {
        self.kv_ops
    }

    /// Bytes of linear memory, all memories together: the most there has been.
    pub(crate) fn memory(&self) -> u64 {
        self.memory
    }

    /// When the request's deadline passes.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// At an epoch tick while the guest runs: interrupt it past its deadline or its CPU
    /// budget (`offloaded`: CPU its host work spent on other threads), else let other tasks
    /// run (on a fiber) and check again next tick.
    pub(crate) fn tick(
        &mut self,
        limits: &Limits,
        cpu_ticks: u32,
        offloaded: Duration,
    ) -> UpdateDeadline {
        if Instant::now() >= self.deadline {
            self.stop = Some(Stop::Deadline);
            return UpdateDeadline::Interrupt;
        }
        // The CPU clock alone is not enough evidence: a stall the kernel or the hypervisor
        // charges to the thread (seen here after idle minutes: 23 ms at once) would stop a
        // guest that did not do the work. A guest really over its budget has also been seen
        // running at about budget / tick ticks; a stall is seen at one.
        self.ticks_seen += 1;
        if self.ticks_seen >= cpu_ticks
            && cpu::used().is_some_and(|used| used + offloaded > limits.cpu)
        {
            self.stop = Some(Stop::Cpu);
            return UpdateDeadline::Interrupt;
        }
        if self.yields { UpdateDeadline::Yield(1) } else { UpdateDeadline::Continue(1) }
    }

    /// Counts one call into the host; past `budget`, records the stop and returns the trap
    /// to raise.
    pub(crate) fn hostcall(&mut self, budget: u32) -> wasmtime::Result<()> {
        self.hostcalls += 1;
        if self.hostcalls > budget {
            self.stop = Some(Stop::Hostcalls);
            return Err(wasmtime::format_err!("host call budget of {budget} spent"));
        }
        Ok(())
    }

    /// Counts `ops` KV operations; past `budget`, refuses them (`false`) without counting
    /// them. The guest is told, not stopped: what it answers is up to it.
    pub(crate) fn kv(&mut self, ops: u32, budget: u32) -> bool {
        match self.kv_ops.checked_add(ops) {
            Some(total) if total <= budget => {
                self.kv_ops = total;
                if let Some(progress) = &self.progress {
                    progress.kv_ops.store(total, std::sync::atomic::Ordering::Relaxed);
                }
                true
            }
            _ => false,
        }
    }

    /// Turns a failed instantiation or call into the kind of failure it was.
    pub(crate) fn classify(&self, error: wasmtime::Error) -> ExecError {
        // The trap, its cause and the guest's backtrace, on one line for the access log.
        let detail = format!("{error:?}").split_whitespace().collect::<Vec<_>>().join(" ");
        let kind = match self.stop {
            Some(Stop::Cpu) => ExecErrorKind::CpuBudgetExceeded,
            Some(Stop::Deadline) => ExecErrorKind::DeadlineExceeded,
            Some(Stop::Hostcalls) => ExecErrorKind::HostcallBudgetExceeded,
            None if error.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
                ExecErrorKind::Capacity
            }
            None if self.memory_refused => ExecErrorKind::OutOfMemory,
            // A component's `wasi:cli/exit`: ending the instance is all it may do.
            None if error.downcast_ref::<wasmtime_wasi::I32Exit>().is_some() => ExecErrorKind::Trap,
            None if error.downcast_ref::<Refused>().is_some() => ExecErrorKind::Trap,
            None => match error.downcast_ref::<Trap>() {
                Some(Trap::StackOverflow) => ExecErrorKind::StackOverflow,
                Some(_) => ExecErrorKind::Trap,
                None => ExecErrorKind::Internal,
            },
        };
        ExecError::new(kind, detail)
    }
}

impl ResourceLimiter for Meter {
    /// The worker's limit bounds all of the instance's memories together, and what the host
    /// holds for it; a refusal is remembered, so the trap that follows is `out_of_memory`.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.memory - current as u64 + desired as u64;
        let allowed = total + self.held <= self.memory_limit;
        self.memory_refused |= !allowed;
        if allowed {
            self.memory = total;
            if let Some(progress) = &self.progress {
                progress.set_memory(total);
            }
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
        self.shape.instances
    }

    fn tables(&self) -> usize {
        self.shape.tables
    }

    fn memories(&self) -> usize {
        self.shape.memories
    }
}
