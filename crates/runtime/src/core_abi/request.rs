//! One request through one fresh instance: the per-request [`Store`] state, the limits it
//! enforces while the guest runs, and the decoding of what the guest returns.
//!
//! ```text
//! Store::new ─▶ instantiate (pool slot, CoW memory) ─▶ edgegate_v1_handle(len)
//!                                                        │  request_read, log, clock, …
//!      epoch tick ─▶ on_epoch: CPU budget? deadline? ────┤  (counted against hostcalls)
//!      memory.grow ─▶ ResourceLimiter: within limit? ────┤
//!                                                        ▼
//!                         decode the outcome from guest memory ─▶ drop the Store (slot freed)
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::Instrument;
use tracing::field::Empty;
use wasmtime::{Memory, Store, StoreContextMut, UpdateDeadline};

use crate::capability::fetch::FetchError;
use crate::core_abi::outcome;
use crate::error::{ExecError, ExecErrorKind};
use crate::guest::{GuestOutcome, GuestRequest, RequestId, WorkerShared};
use crate::limits::Limits;
use crate::limits::cpu;
use crate::limits::meter::Meter;
use crate::limits::usage::Usage;

/// The per-request state a [`Store`] carries.
pub(crate) struct RequestState {
    pub(crate) worker: Arc<WorkerShared>,
    pub(crate) request: GuestRequest,
    pub(crate) request_len: u32,
    pub(crate) request_id: RequestId,
    pub(crate) memory: Option<Memory>,
    /// An answer too large for the guest's buffer, kept for the same call again.
    pub(crate) kept: Option<Kept>,
    pub(crate) fetches: Fetches,
    /// Bytes the host holds for the request after its body (blob 0): image results.
    pub(crate) blobs: Vec<Bytes>,
    /// CPU time host work for the guest spent on other threads (image transforms): charged
    /// to the request like the guest's own.
    pub(crate) offloaded_cpu: Duration,
    /// Its CPU budget, deadline and memory limit, and why the runtime stopped it.
    pub(crate) meter: Meter,
    usage: Usage,
}

impl RequestState {
    /// Counts one host call; past the budget, records the stop and returns the trap to raise.
    pub(crate) fn charge_hostcall(&mut self) -> wasmtime::Result<()> {
        self.meter.hostcall(self.worker.limits.hostcalls)
    }

    /// Blob `handle`: 0 is the request body, then what [`Self::add_blob`] added.
    pub(crate) fn blob(&self, handle: u32) -> Option<&Bytes> {
        match handle.checked_sub(1) {
            None => Some(&self.request.body),
            Some(i) => self.blobs.get(i as usize),
        }
    }

    /// Keeps `bytes` for the request and returns its handle.
    pub(crate) fn add_blob(&mut self, bytes: Bytes) -> i32 {
        self.blobs.push(bytes);
        self.blobs.len() as i32
    }

    /// The CPU time the request has used so far: the guest's (when asked inside its poll)
    /// and its host work on other threads.
    pub(crate) fn cpu_used(&self) -> Duration {
        cpu::used().unwrap_or_default() + self.offloaded_cpu
    }

    /// When the request's deadline passes.
    pub(crate) fn deadline(&self) -> Instant {
        self.meter.deadline()
    }

    /// Counts `ops` KV operations; past the budget, the guest gets `LimitExceeded` (and the
    /// operations are not counted).
    pub(crate) fn charge_kv(&mut self, ops: u32) -> Result<(), edgegate_abi::HostError> {
        if self.meter.kv(ops, self.worker.limits.kv_ops) {
            Ok(())
        } else {
            Err(edgegate_abi::HostError::LimitExceeded)
        }
    }
}

/// An answer kept for a guest whose buffer was too small: the next identical call gets it
/// without asking the store (or the upstream) again.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) call: KeptCall,
    pub(crate) answer: Bytes,
}

/// Which call an answer was for: its kind, namespace and arguments.
#[derive(Debug)]
pub(crate) struct KeptCall {
    kind: u8,
    ns: Vec<u8>,
    input: Vec<u8>,
}

impl KeptCall {
    pub(crate) const GET: u8 = 1;
    pub(crate) const GET_BATCH: u8 = 2;
    pub(crate) const LIST: u8 = 3;
    pub(crate) const FETCH: u8 = 4;
    pub(crate) const CLAIMS: u8 = 5;

    pub(crate) fn new(kind: u8, ns: &str, input: &[u8]) -> Self {
        Self { kind, ns: ns.as_bytes().to_vec(), input: input.to_vec() }
    }

    /// Whether a call with these arguments (`None`: outside guest memory) is this one.
    pub(crate) fn matches(&self, kind: u8, ns: Option<&[u8]>, input: Option<&[u8]>) -> bool {
        self.kind == kind && ns == Some(&self.ns[..]) && input == Some(&self.input[..])
    }
}

/// A fetch running as its own task.
pub(crate) type FetchTask = tokio::task::JoinHandle<Result<http::Response<Bytes>, FetchError>>;

/// The request's fetches: each one's task until the guest waits for it.
#[derive(Debug, Default)]
pub(crate) struct Fetches {
    /// How many were started (the subrequest cap counts these).
    pub(crate) started: u32,
    pub(crate) pending: Vec<Option<FetchTask>>,
}

impl Drop for Fetches {
    /// A request that ends takes its unfinished fetches with it.
    fn drop(&mut self) {
        for task in self.pending.iter().flatten() {
            task.abort();
        }
    }
}

/// Runs at every epoch tick while the guest executes.
fn on_epoch(mut store: StoreContextMut<'_, RequestState>) -> wasmtime::Result<UpdateDeadline> {
    let state = store.data_mut();
    Ok(state.meter.tick(&state.worker.limits, state.worker.cpu_ticks, state.offloaded_cpu))
}

/// The largest CPU budget a worker may have and still be called without a fiber: a guest
/// that cannot yield holds its runtime thread until it ends or a limit stops it, and no
/// longer than about this (one epoch tick more).
pub(crate) const MAX_FIBERLESS_CPU: Duration = Duration::from_millis(10);

/// Everything a request needs from its worker.
pub(crate) struct Target<'a> {
    pub(crate) shared: &'a Arc<WorkerShared>,
    pub(crate) pre: &'a wasmtime::InstancePre<RequestState>,
    pub(crate) handle: &'a wasmtime::ModuleExport,
    pub(crate) memory: &'a wasmtime::ModuleExport,
    /// Whether to run the guest on a fiber: it imports a host function that may wait, or
    /// its CPU budget is over [`MAX_FIBERLESS_CPU`]. Without one, it is instantiated and
    /// called directly on the runtime thread, and the epoch ticks check its limits without
    /// yielding it.
    pub(crate) fiber: bool,
}

/// Runs one request in a fresh instance and returns the guest's outcome.
pub(crate) async fn run(
    target: Target<'_>,
    request: GuestRequest,
    request_id: RequestId,
) -> (Result<GuestOutcome, ExecError>, Usage) {
    let limits = &target.shared.limits;
    let Some(request_len) = edgegate_abi::request::encoded_len(&request.parts())
        .and_then(|len| u32::try_from(len).ok())
    else {
        let error = ExecError::new(ExecErrorKind::Internal, "request does not fit in 4 GiB");
        return (Err(error), Usage::default());
    };
    // Before the store: the epoch must tick from the first guest instruction on.
    let _active = target.shared.activity.enter();
    let deadline = Instant::now() + limits.deadline;
    let (shared, pre) = (target.shared, target.pre);
    let mut store =
        new_store(shared, pre, request, request_len, request_id, deadline, target.fiber);
    // The guest's CPU, as each poll of its call ends: known even when the deadline's timer
    // drops the call before it ends.
    let cpu = AtomicU64::new(0);

    let result = if target.fiber {
        // Pinned in place: the future holds Wasmtime's instantiate and call state (a few
        // KiB), and moving it into the timeout would copy all of it on every request.
        let call = std::pin::pin!(call_guest(&mut store, &target, request_len, &cpu));
        tokio::time::timeout_at(deadline.into(), call).await
    } else {
        // Never suspended, so no timer: the epoch ticks stop it at its deadline.
        Ok(call_guest(&mut store, &target, request_len, &cpu).await)
    };
    let state = store.data();
    let mut usage = state.usage;
    usage.cpu = Duration::from_nanos(cpu.load(Relaxed)) + state.offloaded_cpu;
    usage.kv_ops = state.meter.kv_ops();
    usage.fetches = state.fetches.started;
    if let Some(memory) = state.memory {
        usage.memory_peak = memory.data_size(&store) as u64;
    }
    let outcome = match result {
        Ok(Ok(packed)) => decode(&store, packed, limits).map(|mut outcome| {
            if let GuestOutcome::Forward(forward) = &mut outcome {
                forward.request = std::mem::take(&mut store.data_mut().request);
            }
            outcome
        }),
        Ok(Err(error)) => Err(store.data().meter.classify(error)),
        Err(_elapsed) => Err(ExecError::new(
            ExecErrorKind::DeadlineExceeded,
            format!("no outcome after {:?}", limits.deadline),
        )),
    };
    (outcome, usage)
}

/// A fresh store for one request, within the worker's limits; `fiber`: the guest runs on
/// one, and ticks yield it.
fn new_store(
    shared: &Arc<WorkerShared>,
    pre: &wasmtime::InstancePre<RequestState>,
    request: GuestRequest,
    request_len: u32,
    request_id: RequestId,
    deadline: Instant,
    fiber: bool,
) -> Store<RequestState> {
    let state = RequestState {
        worker: shared.clone(),
        request,
        request_len,
        request_id,
        memory: None,
        kept: None,
        fetches: Fetches::default(),
        blobs: Vec::new(),
        offloaded_cpu: Duration::ZERO,
        meter: Meter::with_yields(
            deadline,
            crate::limits::meter::MODULE,
            shared.limits.memory,
            fiber,
        ),
        usage: Usage::default(),
    };
    let mut store = Store::new(pre.module().engine(), state);
    store.limiter(|state| &mut state.meter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(on_epoch);
    store
}

/// Instantiates once in a fresh store and drops it, calling nothing: a reload's check that the
/// module fits the pool and its start function (if any) runs.
pub(crate) async fn trial(
    shared: &Arc<WorkerShared>,
    pre: &wasmtime::InstancePre<RequestState>,
) -> wasmtime::Result<()> {
    let _active = shared.activity.enter();
    let deadline = Instant::now() + shared.limits.deadline;
    let request = GuestRequest::default();
    let mut store = new_store(shared, pre, request, 0, RequestId(0), deadline, true);
    pre.instantiate_async(&mut store).await.map(drop)
}

async fn call_guest(
    store: &mut Store<RequestState>,
    target: &Target<'_>,
    request_len: u32,
    cpu_sink: &AtomicU64,
) -> wasmtime::Result<u64> {
    let started = Instant::now();
    let tick = target.shared.epoch_tick;
    let span = tracing::info_span!(target: crate::span::SPAN_TARGET, "instantiate");
    let instance = if target.fiber {
        target.pre.instantiate_async(&mut *store).instrument(span).await?
    } else {
        // Metered like the call, so a start function that spins is stopped by the CPU
        // budget (it cannot yield); its CPU is the gateway's, not charged to the guest.
        let instantiate = std::future::poll_fn(|_| {
            std::task::Poll::Ready(span.in_scope(|| target.pre.instantiate(&mut *store)))
        });
        let gateways = AtomicU64::new(0);
        cpu::metered(std::pin::pin!(instantiate), tick, &gateways).await.0?
    };
    store.data_mut().usage.instantiate = started.elapsed();
    let memory = instance
        .get_module_export(&mut *store, target.memory)
        .and_then(|export| export.into_memory())
        .ok_or_else(|| wasmtime::format_err!("memory export vanished"))?;
    store.data_mut().memory = Some(memory);
    let handle = instance
        .get_module_export(&mut *store, target.handle)
        .and_then(|export| export.into_func())
        .ok_or_else(|| wasmtime::format_err!("handle export vanished"))?
        .typed::<u32, u64>(&*store)?;
    // Only the guest's call is metered: instantiating is the gateway's work, and it can be
    // slow for reasons that are not the worker's (a cold process whose pages the kernel took
    // back while it sat idle).
    let started = Instant::now();
    let result = {
        let span = tracing::info_span!(target: crate::span::SPAN_TARGET, "guest", cpu_us = Empty);
        let (result, cpu) = if target.fiber {
            let call = std::pin::pin!(handle.call_async(&mut *store, request_len));
            cpu::metered(call, tick, cpu_sink).instrument(span.clone()).await
        } else {
            let call = std::future::poll_fn(|_| {
                std::task::Poll::Ready(span.in_scope(|| handle.call(&mut *store, request_len)))
            });
            cpu::metered(std::pin::pin!(call), tick, cpu_sink).await
        };
        span.record("cpu_us", cpu.as_micros() as u64);
        result
    };
    // Its CPU is the sink's, which `run` reads (with the host's work charged to it).
    store.data_mut().usage.guest = started.elapsed();
    result
}

/// The guest's outcome at `packed` (pointer and length) in its memory, decoded.
fn decode(
    store: &Store<RequestState>,
    packed: u64,
    limits: &Limits,
) -> Result<GuestOutcome, ExecError> {
    let abi = |detail: String| ExecError::new(ExecErrorKind::AbiViolation, detail);
    let (ptr, len) = edgegate_abi::unpack_outcome(packed);
    let memory = store.data().memory.ok_or_else(|| abi("no memory".into()))?;
    let data = memory.data(store);
    let bytes = (ptr as usize)
        .checked_add(len as usize)
        .and_then(|end| data.get(ptr as usize..end))
        .ok_or_else(|| {
            abi(format!("outcome [{ptr}, +{len}) is outside memory ({} bytes)", data.len()))
        })?;
    outcome::decode(bytes, |blob| store.data().blob(blob).cloned(), limits)
}
