//! KV metrics: `edgegate_kv_operations_total{backend, op, result}` for every operation and
//! `edgegate_kv_duration_seconds{backend, op}` for the redb and Redis backends.
//!
//! In-memory operations are counted but not timed: one takes about 35 ns (`cargo bench -p
//! edgegate-runtime --bench kv`), and reading the clock around it would cost more than it.
//! The handles are registered once per backend and operation, on first use, so that recording
//! is an atomic add (and, when timed, a histogram sample), not a registry lookup.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Instant;

use metrics::{Counter, Histogram};

use crate::{KvError, Store};

/// A KV operation, as the `op` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `get`.
    Get,
    /// `get_batch`.
    GetBatch,
    /// `put`.
    Put,
    /// `put_batch`.
    PutBatch,
    /// `delete`.
    Delete,
    /// `incr`.
    Incr,
    /// `list`.
    List,
}

const OPS: [Op; 7] = [Op::Get, Op::GetBatch, Op::Put, Op::PutBatch, Op::Delete, Op::Incr, Op::List];

impl Op {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::GetBatch => "get_batch",
            Self::Put => "put",
            Self::PutBatch => "put_batch",
            Self::Delete => "delete",
            Self::Incr => "incr",
            Self::List => "list",
        }
    }
}

/// One backend's handles, per operation: `ok` and `error` counters and a duration histogram.
struct Handles {
    ok: Vec<Counter>,
    error: Vec<Counter>,
    duration: Vec<Histogram>,
}

impl Handles {
    fn register(backend: &'static str) -> Self {
        let counter = |op: Op, result: &'static str| metrics::counter!("edgegate_kv_operations_total", "backend" => backend, "op" => op.as_str(), "result" => result);
        Self {
            ok: OPS.iter().map(|&op| counter(op, "ok")).collect(),
            error: OPS.iter().map(|&op| counter(op, "error")).collect(),
            duration: OPS
                .iter()
                .map(|&op| metrics::histogram!("edgegate_kv_duration_seconds", "backend" => backend, "op" => op.as_str()))
                .collect(),
        }
    }

    fn of(store: &Store) -> &'static Self {
        static MEMORY: OnceLock<Handles> = OnceLock::new();
        static DISK: OnceLock<Handles> = OnceLock::new();
        static REDIS: OnceLock<Handles> = OnceLock::new();
        let cell = match store {
            Store::Memory(_) => &MEMORY,
            Store::Disk(_) => &DISK,
            Store::Redis(_) => &REDIS,
        };
        cell.get_or_init(|| Self::register(store.kind()))
    }

    fn count(&self, op: Op, ok: bool) {
        let index = op as usize;
        if ok { &self.ok[index] } else { &self.error[index] }.increment(1);
    }
}

impl Store {
    /// Runs `call`, an operation on this store, and records it: counted always, timed unless
    /// the store is in memory.
    pub async fn observed<T>(
        &self,
        op: Op,
        call: impl Future<Output = Result<T, KvError>>,
    ) -> Result<T, KvError> {
        let handles = Handles::of(self);
        let started = (!matches!(self, Store::Memory(_))).then(Instant::now);
        let result = call.await;
        handles.count(op, result.is_ok());
        if let Some(started) = started {
            handles.duration[op as usize].record(started.elapsed().as_secs_f64());
        }
        result
    }

    /// Counts an operation answered without [`observed`](Self::observed) (an in-memory get
    /// the host call answers in place).
    pub fn count(&self, op: Op, ok: bool) {
        Handles::of(self).count(op, ok);
    }
}
