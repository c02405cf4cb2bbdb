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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use edgegate_abi::outcome::{EditOp, ErrorCode, Outcome as AbiOutcome};
use edgegate_abi::request::{Headers, RequestParts};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use tracing::Instrument;
use tracing::field::Empty;
use wasmtime::{Memory, ResourceLimiter, Store, StoreContextMut, UpdateDeadline};

use crate::cpu;
use crate::error::{ExecError, ExecErrorKind};
use crate::fetch::{FetchError, Fetcher};
use crate::keys::Keys;
use crate::limits::Limits;
use crate::meter::Meter;

/// A request's id, unique within a gateway process: 16 hex digits in logs and error bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// What one request's guest cost, measured whether it answered or failed (what was not
/// reached stays zero: a request refused for capacity never instantiated).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Wall time to instantiate the module: a pool slot, copy-on-write memory, the start.
    pub instantiate: Duration,
    /// Wall time of the guest's call, waits for async host calls included.
    pub guest: Duration,
    /// CPU time of the guest's call on its thread: what the CPU budget counts (the waits are
    /// not in it).
    pub cpu: Duration,
    /// The guest's linear memory at the end, in bytes: its peak, since Wasm memory only grows.
    pub memory_peak: u64,
}

/// A request as the runtime hands it to a guest: the head and the complete body.
#[derive(Debug, Clone, Default)]
pub struct GuestRequest {
    /// The method.
    pub method: http::Method,
    /// The URI: its path and query become the guest's target; its authority, if any, the
    /// guest's host.
    pub uri: http::Uri,
    /// The headers.
    pub headers: HeaderMap,
    /// The whole body, already read within the worker's limit.
    pub body: Bytes,
    /// Whether the client connected over TLS.
    pub tls: bool,
}

/// The ABI's view of a [`HeaderMap`].
#[derive(Clone, Copy)]
pub(crate) struct HeaderMapHeaders<'a>(&'a HeaderMap);

impl Headers for HeaderMapHeaders<'_> {
    fn visit<F: FnMut(&[u8], &[u8])>(&self, mut f: F) {
        for (name, value) in self.0 {
            f(name.as_str().as_bytes(), value.as_bytes());
        }
    }
}

impl GuestRequest {
    fn authority(&self) -> &str {
        match self.uri.authority() {
            Some(authority) => authority.as_str(),
            None => {
                self.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("")
            }
        }
    }

    /// The parts the ABI encodes, without the body (held by the host as blob 0).
    pub(crate) fn head(&self) -> RequestParts<'_, HeaderMapHeaders<'_>> {
        RequestParts { body: &[], body_held: true, ..self.parts() }
    }

    /// The parts the ABI encodes.
    pub(crate) fn parts(&self) -> RequestParts<'_, HeaderMapHeaders<'_>> {
        RequestParts {
            method: self.method.as_str(),
            target: self.uri.path_and_query().map_or("/", |pq| pq.as_str()),
            authority: self.authority(),
            headers: HeaderMapHeaders(&self.headers),
            body: &self.body,
            tls: self.tls,
            body_held: false,
        }
    }
}

/// What a guest decided, once decoded and checked.
#[derive(Debug)]
pub enum GuestOutcome {
    /// A complete response to send.
    Response(http::Response<Bytes>),
    /// Proxy the request to an upstream.
    Forward(Forward),
}

/// A decoded forward directive, with the request it is for (handed back from the store, not
/// copied).
#[derive(Debug, Clone)]
pub struct Forward {
    /// The upstream's configured name.
    pub upstream: String,
    /// Header edits to apply to the request before proxying, in order.
    pub edits: Vec<HeaderEdit>,
    /// The request the guest saw, to proxy.
    pub request: GuestRequest,
}

/// One header edit of a [`Forward`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderEdit {
    /// Replace all values.
    Set(HeaderName, HeaderValue),
    /// Add a value.
    Append(HeaderName, HeaderValue),
    /// Remove the header.
    Remove(HeaderName),
}

/// What the store remembers about the worker, shared by all its requests.
#[derive(Debug)]
pub(crate) struct WorkerShared {
    pub(crate) name: String,
    pub(crate) limits: Limits,
    pub(crate) config: BTreeMap<String, String>,
    /// `config`, encoded once for `config_all`.
    pub(crate) config_block: Vec<u8>,
    pub(crate) keys: Option<Keys>,
    /// The KV namespaces the worker is granted.
    pub(crate) kv: Vec<edgegate_kv::Namespace>,
    /// How it makes outbound requests; `None`: it may make none.
    pub(crate) fetcher: Option<Arc<dyn Fetcher>>,
    /// What its image work may use; `None`: it may do none.
    pub(crate) image: Option<Arc<crate::image::ImageShared>>,
    pub(crate) wall_clock: fn() -> std::time::SystemTime,
    /// The epoch ticks a guest must have been seen running at before its CPU budget can stop
    /// it: the budget in ticks, at least 1.
    pub(crate) cpu_ticks: u32,
    /// The epoch tick: how much of a poll is charged by the wall clock before the CPU clock
    /// is read (see [`cpu`]).
    pub(crate) epoch_tick: Duration,
    /// What every request tells the runtime's epoch ticker.
    pub(crate) activity: Arc<crate::engine::Activity>,
}

/// The per-request state a [`Store`] carries.
pub(crate) struct RequestState {
    pub(crate) worker: Arc<WorkerShared>,
    pub(crate) request: GuestRequest,
    pub(crate) request_len: u32,
    pub(crate) request_id: RequestId,
    pub(crate) memory: Option<Memory>,
    /// KV operations so far (a batch counts each key).
    pub(crate) kv_ops: u32,
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
        match self.kv_ops.checked_add(ops) {
            Some(total) if total <= self.worker.limits.kv_ops => {
                self.kv_ops = total;
                Ok(())
            }
            _ => Err(edgegate_abi::HostError::LimitExceeded),
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

impl ResourceLimiter for RequestState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.meter.grow(desired as u64, self.worker.limits.memory))
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
        1
    }

    fn tables(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }
}

/// A guest may grow its function table this far (Rust modules start with a few hundred).
const MAX_TABLE_ELEMENTS: usize = 10_000;

/// Runs at every epoch tick while the guest executes.
fn on_epoch(mut store: StoreContextMut<'_, RequestState>) -> wasmtime::Result<UpdateDeadline> {
    let state = store.data_mut();
    Ok(state.meter.tick(&state.worker, state.offloaded_cpu))
}

/// Everything a request needs from its worker.
pub(crate) struct Target<'a> {
    pub(crate) shared: &'a Arc<WorkerShared>,
    pub(crate) pre: &'a wasmtime::InstancePre<RequestState>,
    pub(crate) handle: &'a wasmtime::ModuleExport,
    pub(crate) memory: &'a wasmtime::ModuleExport,
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
    let mut store =
        new_store(target.shared, target.pre, request, request_len, request_id, deadline);

    // Pinned in place: the future holds Wasmtime's instantiate and call state (a few KiB), and
    // moving it into the timeout would copy all of it on every request.
    let result = {
        let call = std::pin::pin!(call_guest(&mut store, &target, request_len));
        tokio::time::timeout_at(deadline.into(), call).await
    };
    let mut usage = store.data().usage;
    if let Some(memory) = store.data().memory {
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

/// A fresh store for one request, within the worker's limits.
fn new_store(
    shared: &Arc<WorkerShared>,
    pre: &wasmtime::InstancePre<RequestState>,
    request: GuestRequest,
    request_len: u32,
    request_id: RequestId,
    deadline: Instant,
) -> Store<RequestState> {
    let state = RequestState {
        worker: shared.clone(),
        request,
        request_len,
        request_id,
        memory: None,
        kv_ops: 0,
        kept: None,
        fetches: Fetches::default(),
        blobs: Vec::new(),
        offloaded_cpu: Duration::ZERO,
        meter: Meter::new(deadline),
        usage: Usage::default(),
    };
    let mut store = Store::new(pre.module().engine(), state);
    store.limiter(|state| state);
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
    let mut store = new_store(shared, pre, GuestRequest::default(), 0, RequestId(0), deadline);
    pre.instantiate_async(&mut store).await.map(drop)
}

async fn call_guest(
    store: &mut Store<RequestState>,
    target: &Target<'_>,
    request_len: u32,
) -> wasmtime::Result<u64> {
    let started = Instant::now();
    let instance = target
        .pre
        .instantiate_async(&mut *store)
        .instrument(tracing::info_span!(target: crate::SPAN_TARGET, "instantiate"))
        .await?;
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
    let (result, cpu) = {
        let call = std::pin::pin!(handle.call_async(&mut *store, request_len));
        let span = tracing::info_span!(target: crate::SPAN_TARGET, "guest", cpu_us = Empty);
        let tick = target.shared.epoch_tick;
        let (result, cpu) = cpu::metered(call, tick).instrument(span.clone()).await;
        span.record("cpu_us", cpu.as_micros() as u64);
        (result, cpu)
    };
    let state = store.data_mut();
    state.usage.guest = started.elapsed();
    state.usage.cpu = cpu + state.offloaded_cpu;
    result
}

/// Headers a worker may not set, on a response or a forwarded request: they describe the
/// connection or the message framing, which the gateway owns. A worker that sets one gets
/// `invalid_response`, not a quiet fix. `content-length` is the exception on a response: one
/// that equals the body's length is what the gateway would send anyway, so it is accepted
/// (and the gateway's own is sent).
const CONNECTION_HEADERS: [HeaderName; 8] = [
    http::header::CONNECTION,
    http::header::CONTENT_LENGTH,
    http::header::TRANSFER_ENCODING,
    http::header::TE,
    http::header::TRAILER,
    http::header::UPGRADE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

/// The statuses a worker may answer with. 1xx are interim responses (and 101 would switch
/// protocols without an upgrade), not answers; above 599 is not HTTP.
const WORKER_STATUSES: std::ops::RangeInclusive<u16> = 200..=599;

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
    match AbiOutcome::parse(bytes).map_err(|e| abi(format!("malformed outcome: {e}")))? {
        AbiOutcome::Response { status, headers, body } => {
            response(status, headers, limits, body.len(), || Bytes::copy_from_slice(body))
        }
        AbiOutcome::BlobResponse { status, headers, blob } => {
            let body = store.data().blob(blob).cloned().ok_or_else(|| {
                abi(format!("the response's body is blob {blob}, which does not exist"))
            })?;
            response(status, headers, limits, body.len(), || body)
        }
        AbiOutcome::Forward { upstream, edits } => {
            let edits = edits
                .iter()
                .map(|(op, name, value)| {
                    let name = header_name(name)?;
                    let edit = match op {
                        EditOp::Remove => return Ok(HeaderEdit::Remove(name)),
                        EditOp::Set => HeaderEdit::Set,
                        EditOp::Append => HeaderEdit::Append,
                    };
                    connection_header(&name)?;
                    let value = header_value(&name, value)?;
                    Ok(edit(name, value))
                })
                .collect::<Result<_, ExecError>>()?;
            Ok(GuestOutcome::Forward(Forward {
                upstream: upstream.to_owned(),
                edits,
                request: GuestRequest::default(),
            }))
        }
        AbiOutcome::Error { code, message } => {
            let kind = match code {
                ErrorCode::Unavailable => ExecErrorKind::WorkerUnavailable,
                ErrorCode::Internal | ErrorCode::BadRequestBuffer => ExecErrorKind::WorkerFailed,
            };
            Err(ExecError::new(kind, format!("{code:?}: {message}")))
        }
    }
}

/// A checked response: status, headers, and a body of `len` bytes made by `body` once the
/// rest is known to be good. A component's answer is checked by the same rules.
pub(crate) fn response<'h>(
    status: u16,
    headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
    limits: &Limits,
    len: usize,
    body: impl FnOnce() -> Bytes,
) -> Result<GuestOutcome, ExecError> {
    if len as u64 > limits.response_body {
        return Err(ExecError::new(
            ExecErrorKind::ResponseTooLarge,
            format!("{len} bytes, limit {}", limits.response_body),
        ));
    }
    if !WORKER_STATUSES.contains(&status) {
        return Err(invalid(format!("status {status}: a worker answers 200 to 599")));
    }
    let status = StatusCode::from_u16(status).map_err(|e| invalid(e.to_string()))?;
    let headers = headers.into_iter();
    let mut map = HeaderMap::with_capacity(headers.size_hint().0);
    for (name, value) in headers {
        let name = header_name(name)?;
        let value = header_value(&name, value)?;
        if name == http::header::CONTENT_LENGTH {
            if value.as_bytes() != len.to_string().as_bytes() {
                return Err(invalid(format!(
                    "content-length {:?} for a body of {len} bytes",
                    String::from_utf8_lossy(value.as_bytes()),
                )));
            }
            continue;
        }
        connection_header(&name)?;
        map.append(name, value);
    }
    let mut response = http::Response::new(body());
    *response.status_mut() = status;
    *response.headers_mut() = map;
    Ok(GuestOutcome::Response(response))
}

fn invalid(detail: String) -> ExecError {
    ExecError::new(ExecErrorKind::InvalidResponse, detail)
}

fn header_name(name: &[u8]) -> Result<HeaderName, ExecError> {
    HeaderName::from_bytes(name)
        .map_err(|_| invalid(format!("bad header name {:?}", String::from_utf8_lossy(name))))
}

/// Refuses a connection or framing header (see [`CONNECTION_HEADERS`]).
fn connection_header(name: &HeaderName) -> Result<(), ExecError> {
    if CONNECTION_HEADERS.contains(name) {
        return Err(invalid(format!("header {name} is the gateway's to set")));
    }
    Ok(())
}

/// A value with no CR, LF, NUL or other control character but tab (`HeaderValue`'s rule).
fn header_value(name: &HeaderName, value: &[u8]) -> Result<HeaderValue, ExecError> {
    HeaderValue::from_bytes(value).map_err(|_| invalid(format!("bad value for header {name}")))
}
