//! What stops a running guest, module or component alike: its CPU budget and its deadline,
//! checked at every epoch tick, its memory limit when it grows, its host call budget, and the
//! record of why the runtime stopped it, so that the trap that follows is told apart from the
//! guest's own.

use std::time::{Duration, Instant};

use wasmtime::{Trap, UpdateDeadline};

use crate::cpu;
use crate::error::{ExecError, ExecErrorKind};
use crate::request::WorkerShared;

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
    deadline: Instant,
}

impl Meter {
    pub(crate) fn new(deadline: Instant) -> Self {
        Self { stop: None, memory_refused: false, ticks_seen: 0, hostcalls: 0, deadline }
    }

    /// When the request's deadline passes.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// At an epoch tick while the guest runs: interrupt it past its deadline or its CPU
    /// budget (`offloaded`: CPU its host work spent on other threads), else let other tasks
    /// run and check again next tick.
    pub(crate) fn tick(&mut self, worker: &WorkerShared, offloaded: Duration) -> UpdateDeadline {
        if Instant::now() >= self.deadline {
            self.stop = Some(Stop::Deadline);
            return UpdateDeadline::Interrupt;
        }
        // The CPU clock alone is not enough evidence: a stall the kernel or the hypervisor
        // charges to the thread (seen here after idle minutes: 23 ms at once) would stop a
        // guest that did not do the work. A guest really over its budget has also been seen
        // running at about budget / tick ticks; a stall is seen at one.
        self.ticks_seen += 1;
        if self.ticks_seen >= worker.cpu_ticks
            && cpu::used().is_some_and(|used| used + offloaded > worker.limits.cpu)
        {
            self.stop = Some(Stop::Cpu);
            return UpdateDeadline::Interrupt;
        }
        UpdateDeadline::Yield(1)
    }

    /// Whether growing memory to `desired` bytes in all stays within `limit`; a refusal is
    /// remembered, so the trap that follows is `out_of_memory`.
    pub(crate) fn grow(&mut self, desired: u64, limit: u64) -> bool {
        let allowed = desired <= limit;
        self.memory_refused |= !allowed;
        allowed
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
