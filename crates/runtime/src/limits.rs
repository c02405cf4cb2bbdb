//! Per-worker limits, and what holds a request to them: the one meter both ABIs run under
//! ([`meter`]), the thread's CPU clock ([`cpu`]), what a request used ([`usage`]), and sizes and
//! durations as configuration writes them ([`units`]).
//!
//! Every limit bounds one request, never the process: when a request spends one, that request
//! ends with a clear error and the next request to the same worker starts from a fresh instance
//! as if nothing happened. `docs/limits.md` has the same essays for operators.

pub(crate) mod cpu;
pub(crate) mod meter;
pub mod units;
pub(crate) mod usage;

use std::time::Duration;

use serde::Deserialize;

use crate::limits::units::{bytes, duration};

/// The limits one worker's requests run under. Each field documents what it bounds, its
/// default, and what happens when it is hit.
///
/// It reads from the worker's `[workers.NAME.limits]` table: sizes as `"2MiB"` or bytes,
/// times as `"2ms"`; a field left out keeps its default, and an unknown one is an error.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// **Linear memory**, in bytes (default 2 MiB).
    ///
    /// Bounds the guest's whole linear memory: stack, static data, the request copy, and the
    /// arena. A module whose *initial* memory is larger is refused when it is loaded. At run
    /// time `memory.grow` past the limit fails (returns -1) the way it does on any Wasm engine;
    /// a guest built with the SDK then traps on its allocation failure, and the request gets
    /// **500 `out_of_memory`**. Rounded down to whole 64 KiB pages.
    #[serde(deserialize_with = "bytes")]
    pub memory: u64,

    /// **CPU time**, per request (default 2 ms).
    ///
    /// Bounds the CPU time the request's guest code (and the host functions it calls
    /// synchronously) consumes from the call of its entry point on (instantiating the fresh
    /// instance is the gateway's cost, not the worker's), read from the thread CPU clock
    /// (`CLOCK_THREAD_CPUTIME_ID`) of the thread running the guest, and summed over every
    /// stretch the guest runs. Time the guest spends waiting (for an asynchronous host call,
    /// for the scheduler after it yields, or preempted by the OS) is not counted. It is checked
    /// at every epoch tick (see `RuntimeConfig::epoch_tick`, default 1 ms), so a guest is stopped
    /// within about one tick past its budget. The clock alone does not stop a guest: it must
    /// also have been seen running at about budget / tick ticks, so that one stall the kernel or
    /// a hypervisor charges to the thread does not stop a request that did not do the work. The request gets **503 `cpu_budget_exceeded`**.
    #[serde(deserialize_with = "duration")]
    pub cpu: Duration,

    /// **Wall-clock deadline**, per request (default 1 s).
    ///
    /// Bounds the time from the start of the instance to its outcome, including waits. Checked
    /// at every epoch tick while the guest runs and by a timer while it waits. The request gets
    /// **504 `deadline_exceeded`**.
    #[serde(deserialize_with = "duration")]
    pub deadline: Duration,

    /// **Response body size**, in bytes (default 1 MiB).
    ///
    /// A guest whose response body is larger gets **500 `response_too_large`** instead; nothing
    /// of the oversized body is sent.
    #[serde(deserialize_with = "bytes")]
    pub response_body: u64,

    /// **Host calls**, per request (default 1000).
    ///
    /// Bounds how many times the guest may call into the host (log, clock, random, config, …),
    /// so a guest cannot flood the log or spin on cheap host calls. The call past the budget
    /// traps and the request gets **503 `hostcall_budget_exceeded`**.
    pub hostcalls: u32,

    /// **KV operations**, per request (default 100).
    ///
    /// Bounds how many keys a request may read, write, delete, increment or list through the
    /// KV hostcalls: each key of a batch counts one, a `kv_list` call one. Past it, the call
    /// returns `LimitExceeded` to the guest and does nothing; what the guest answers is up to
    /// it (the SDK reports [`edgegate_abi::HostError::LimitExceeded`]).
    pub kv_ops: u32,

    /// **KV value size**, in bytes (default 1 MiB).
    ///
    /// The largest value the worker may store. A bigger one is refused with `LimitExceeded`
    /// and nothing is written. (Keys are at most 512 bytes for every worker.)
    #[serde(deserialize_with = "bytes")]
    pub kv_value: u64,

    /// **Subrequests**, per request (default 32).
    ///
    /// Bounds how many outbound requests (`fetch_start`) one request may start. The one past
    /// it gets `LimitExceeded` and is not sent.
    pub subrequests: u32,

    /// **Subrequest response body size**, in bytes (default 1 MiB).
    ///
    /// The host reads a fetched response's body whole before the guest sees it, and stops at
    /// this many bytes: the guest's `fetch_wait` gets `LimitExceeded` and none of the body.
    #[serde(deserialize_with = "bytes")]
    pub subrequest_body: u64,
}

impl Limits {
    /// The default memory limit: 2 MiB.
    pub const DEFAULT_MEMORY: u64 = 2 << 20;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory: Self::DEFAULT_MEMORY,
            cpu: Duration::from_millis(2),
            deadline: Duration::from_secs(1),
            response_body: 1 << 20,
            hostcalls: 1000,
            kv_ops: 100,
            kv_value: 1 << 20,
            subrequests: 32,
            subrequest_body: 1 << 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sizes_and_times_as_configuration_writes_them() {
        let limits: Limits =
            toml::from_str("memory = \"4MiB\"\ncpu = \"5ms\"\nkv_ops = 7").unwrap();
        let expected = Limits {
            memory: 4 << 20,
            cpu: Duration::from_millis(5),
            kv_ops: 7,
            ..Limits::default()
        };
        assert_eq!(limits, expected);
        assert_eq!(toml::from_str::<Limits>("").unwrap(), Limits::default());
        let unknown = toml::from_str::<Limits>("cpus = \"5ms\"").unwrap_err().to_string();
        assert!(unknown.contains("unknown field `cpus`"), "{unknown}");
        let bad = toml::from_str::<Limits>("deadline = \"soon\"").unwrap_err().to_string();
        assert!(bad.contains("invalid duration `soon`"), "{bad}");
    }
}
