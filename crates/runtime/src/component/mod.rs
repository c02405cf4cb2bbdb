//! Standard `wasi:http/proxy` components as workers: the second ABI, beside edgegate's own.
//!
//! A component is served through `wasmtime-wasi-http`. Its `ProxyPre` is built once, when the
//! worker loads; each request gets a fresh [`Store`], instance and resource table, exactly as
//! a module does, within the same limits:
//!
//! ```text
//!  GuestRequest ─▶ new_incoming_request ─┐
//!  oneshot ◀──── new_response_outparam ──┤
//!                                        ▼
//!  task: instantiate_async ─▶ call_handle (metered; epoch: CPU budget, deadline;
//!        │                        │         call hook: host call budget; limiter: memory)
//!        │                        ▼
//!        │        response-outparam.set ─▶ head ─▶ body read, ≤ response_body
//!        ▼                                  ├─ ends within BUFFER ─▶ GuestOutcome::Response
//!  the store drops ─▶ stdout and stderr     └─ goes on ─▶ GuestOutcome::Streamed (the rest
//!    lines go to the log                       as written; cut if the guest fails)
//! ```
//!
//! The guest runs in its own task, so that its body writes and the host's reading of them
//! proceed together. An answer of up to [`BUFFER`] is buffered: the request waits for both,
//! the guest's failure (a trap, a limit) wins over an answer it already gave, the module's
//! response checks apply, and the access log has the whole request's cost. A longer one is
//! streamed ([`streamed`]): its head checked and sent, the rest as the guest writes it, cut
//! if the guest fails before it is whole.
//!
//! Linked: the proxy world (`wasi:http/types`, `wasi:http/outgoing-handler`, `wasi:io`,
//! `wasi:clocks`, `wasi:random`, `wasi:cli/std{in,out,err}`), and for guests built with `std`
//! the `wasi:cli` environment (empty), exit (a trap), terminal interfaces (none) and
//! `wasi:random/insecure{,-seed}`; and edgegate's KV and configuration through
//! `wasi:keyvalue` and `wasi:config/store`. Any other import is refused at load, by name.

mod bindings;
mod bucket;
mod config;
mod held;
mod keyvalue;
mod outbound;
pub(crate) mod provided;
mod state;
mod streamed;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tracing::Instrument;
use tracing::field::Empty;
use wasmtime::component::{Component, Linker, ResourceTableError};
use wasmtime::{CallHook, Engine, Store};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;

pub use provided::provides;
pub(crate) use state::ComponentState;
use streamed::Task;

use crate::error::{ExecError, ExecErrorKind, LoadError};
use crate::guest::escape::escape_control;
use crate::guest::{GuestOutcome, GuestRequest, RequestId, WorkerShared};
use crate::limits::Limits;
use crate::limits::cpu;
use crate::limits::meter::Refused;
use crate::limits::usage::{Progress, Usage};

/// The host side of everything in [`provided::PROVIDED`].
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<ComponentState>> {
    use wasmtime_wasi::p2::bindings::{cli, random};
    type T = ComponentState;
    let mut linker = Linker::new(engine);
    wasmtime_wasi_http::p2::add_to_linker_async(&mut linker)?;
    let l = &mut linker;
    random::insecure::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    use bindings::{config, keyvalue};
    use wasmtime::component::HasSelf;
    keyvalue::store::add_to_linker::<T, HasSelf<T>>(l, |t| t)?;
    keyvalue::atomics::add_to_linker::<T, HasSelf<T>>(l, |t| t)?;
    keyvalue::batch::add_to_linker::<T, HasSelf<T>>(l, |t| t)?;
    config::store::add_to_linker::<T, HasSelf<T>>(l, |t| t)?;
    Ok(linker)
}

/// What a component is made of, from its bytes: what an instance of it allocates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    /// Core instances it instantiates.
    pub(crate) instances: usize,
    /// Linear memories its core modules define.
    pub(crate) memories: usize,
    /// Tables its core modules define.
    pub(crate) tables: usize,
    /// Bytes of memory it starts with, all memories together.
    pub(crate) initial_memory: u64,
}

impl Needs {
    /// Reads `wasm`, a component's binary (not a `.cwasm`: nothing to read there).
    pub(crate) fn of(wasm: &[u8]) -> Self {
        use wasmparser::{Instance, Parser, Payload};
        let mut needs = Self::default();
        for payload in Parser::new(0).parse_all(wasm).flatten() {
            match payload {
                Payload::InstanceSection(reader) => {
                    needs.instances += reader
                        .into_iter()
                        .flatten()
                        .filter(|i| matches!(i, Instance::Instantiate { .. }))
                        .count();
                }
                Payload::MemorySection(reader) => {
                    for memory in reader.into_iter().flatten() {
                        needs.memories += 1;
                        let page = 1u64 << memory.page_size_log2.unwrap_or(16);
                        needs.initial_memory += memory.initial.saturating_mul(page);
                    }
                }
                Payload::TableSection(reader) => needs.tables += reader.count() as usize,
                _ => {}
            }
        }
        needs
    }

    /// Checks against the caps of one instance slot.
    fn check(&self) -> Result<(), LoadError> {
        let over = |what: &'static str, needed: usize, cap: usize| {
            (needed > cap).then_some(LoadError::ComponentTooLarge { what, needed, cap })
        };
        let cap = crate::limits::meter::COMPONENT;
        match over("core instances", self.instances, cap.instances)
            .or_else(|| over("linear memories", self.memories, cap.memories))
            .or_else(|| over("tables", self.tables, cap.tables))
        {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// Checks a compiled component (and `wasm`, the bytes it came from, when they are at hand and
/// not a `.cwasm`) and links it: its imports by name, its size against the caps, and its
/// export of the proxy world. Returns the link, its imports and what an instance allocates.
pub(crate) fn load(
    linker: &Linker<ComponentState>,
    component: &Component,
    wasm: Option<&[u8]>,
) -> Result<(ProxyPre<ComponentState>, Vec<String>, Needs), LoadError> {
    let engine = linker.engine();
    let imports: Vec<String> =
        component.component_type().imports(engine).map(|(name, _)| name.to_owned()).collect();
    if let Some(unknown) = imports.iter().find(|name| !provides(name)) {
        return Err(LoadError::UnknownComponentImport(unknown.clone()));
    }
    let needs = match wasm {
        Some(wasm) if wasmparser::Parser::is_component(wasm) => Needs::of(wasm),
        _ => Needs::default(),
    };
    needs.check()?;
    let pre = linker.instantiate_pre(component).map_err(LoadError::Link)?;
    let pre = ProxyPre::new(pre).map_err(LoadError::NotAProxy)?;
    Ok((pre, imports, needs))
}

/// Runs one request in a fresh instance of the component and returns its answer, buffered.
pub(crate) async fn run(
    shared: &Arc<WorkerShared>,
    pre: &ProxyPre<ComponentState>,
    request: GuestRequest,
    request_id: RequestId,
) -> (Result<GuestOutcome, ExecError>, Usage) {
    let limits = &shared.limits;
    let deadline = Instant::now() + limits.deadline;
    // What it uses, told as it happens: known however the request ends, streamed or not.
    let progress = Arc::new(Progress::default());
    let mut store = new_store(shared, pre, request_id, deadline, progress.clone());
    let scheme = if request.tls { Scheme::Https } else { Scheme::Http };
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let resources = (|| {
        let http = &mut store.data_mut().http();
        Ok::<_, wasmtime::Error>((
            http.new_incoming_request(scheme, incoming(request))?,
            http.new_response_outparam(sender)?,
        ))
    })();
    let (incoming, outparam) = match resources {
        Ok(resources) => resources,
        Err(error) => {
            let error = ExecError::new(ExecErrorKind::Internal, format!("{error:#}"));
            return (Err(error), Usage::default());
        }
    };
    let pre = pre.clone();
    let tick = shared.epoch_tick;
    let task = tokio::spawn(async move {
        let worker = store.data().worker.clone();
        // Before instantiating: the epoch must tick from the first guest instruction on.
        let _active = worker.activity.enter();
        let result = call(&mut store, &pre, incoming, outparam, tick).await;
        let unfinished = store.data_mut().abort_unfinished_bodies();
        let state = store.data();
        log_output(state);
        let usage = state.progress.usage();
        let result = result.map_err(|error| state.meter.classify(error)).and_then(|()| {
            if unfinished == 0 {
                return Ok(());
            }
            Err(ExecError::new(
                ExecErrorKind::WorkerFailed,
                format!(
                    "the component returned without finishing or dropping {unfinished} \
                     outgoing bodies: its answer would be cut short"
                ),
            ))
        });
        (result, usage)
    });
    // A client that goes away takes the instance with it.
    let mut task = Task(task);

    let answer = async {
        match receiver.await {
            Ok(Ok(response)) => Some(buffer(response, limits).await),
            Ok(Err(code)) => Some(Buffered::Whole(Err(ExecError::new(
                ExecErrorKind::WorkerFailed,
                format!("the component answered with the error {code:?}"),
            )))),
            // Dropped with the store, never set: the guest's own outcome says why.
            Err(_) => None,
        }
    };
    let answer = match tokio::time::timeout_at(deadline.into(), answer).await {
        // Past the buffer: the head goes now, the rest as the guest writes it.
        Ok(Some(Buffered::Partial { parts, prefix, rest })) => {
            let limit = limits.response_body;
            let head = check_head(&parts, limits, None, || prefix);
            let outcome = head.map(|checked| {
                let (head, prefix) = checked.into_parts();
                let worker: Arc<str> = shared.name.as_str().into();
                let of = streamed::Streaming {
                    deadline,
                    limit,
                    worker,
                    request_id,
                    progress: progress.clone(),
                };
                let body = streamed::ComponentBody::new(prefix, rest, task, of);
                let response = http::Response::from_parts(head, BodyExt::boxed_unsync(body));
                GuestOutcome::Streamed(response, progress.clone())
            });
            return (outcome, progress.usage());
        }
        Ok(Some(Buffered::Whole(answer))) => Ok(Some(answer)),
        Ok(None) => Ok(None),
        Err(elapsed) => Err(elapsed),
    };
    let finished = tokio::time::timeout_at(deadline.into(), &mut task.0).await;
    let past_deadline = || {
        let error = ExecError::new(
            ExecErrorKind::DeadlineExceeded,
            format!("no outcome after {:?}", limits.deadline),
        );
        (Err(error), progress.usage())
    };
    let (guest, usage) = match finished {
        Ok(Ok(finished)) => finished,
        Ok(Err(join)) => {
            let error =
                ExecError::new(ExecErrorKind::Internal, format!("the guest's task: {join}"));
            return (Err(error), progress.usage());
        }
        Err(_elapsed) => return past_deadline(),
    };
    let outcome = match (guest, answer) {
        (Err(error), _) => Err(error),
        (Ok(()), Err(_elapsed)) => return past_deadline(),
        (Ok(()), Ok(Some(answer))) => answer,
        (Ok(()), Ok(None)) => Err(ExecError::new(
            ExecErrorKind::WorkerFailed,
            "the component returned without setting a response",
        )),
    };
    (outcome, usage)
}

/// Instantiates once in a fresh store and drops it, calling nothing: a reload's check that
/// the component fits the pool.
pub(crate) async fn trial(
    shared: &Arc<WorkerShared>,
    pre: &ProxyPre<ComponentState>,
) -> wasmtime::Result<()> {
    let _active = shared.activity.enter();
    let deadline = Instant::now() + shared.limits.deadline;
    let mut store = new_store(shared, pre, RequestId(0), deadline, Arc::default());
    pre.instantiate_async(&mut store).await.map(drop)
}

/// A fresh store for one request, within the worker's limits.
fn new_store(
    shared: &Arc<WorkerShared>,
    pre: &ProxyPre<ComponentState>,
    request_id: RequestId,
    deadline: Instant,
    progress: Arc<Progress>,
) -> Store<ComponentState> {
    let state = ComponentState::new(shared.clone(), request_id, deadline, progress);
    let mut store = Store::new(pre.engine(), state);
    store.limiter(|state| &mut state.meter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut store| {
        let state = store.data_mut();
        Ok(state.meter.tick(&state.worker.limits, state.worker.cpu_ticks, Duration::ZERO))
    });
    store.call_hook(|mut store, hook| match hook {
        CallHook::CallingHost => store.data_mut().charge_hostcall(),
        CallHook::ReturningFromHost => store.data_mut().returned(),
        _ => Ok(()),
    });
    store
}

/// Instantiates and calls `handle`, metering the call as a module's is.
async fn call(
    store: &mut Store<ComponentState>,
    pre: &ProxyPre<ComponentState>,
    incoming: wasmtime::component::Resource<wasmtime_wasi_http::p2::types::HostIncomingRequest>,
    outparam: wasmtime::component::Resource<wasmtime_wasi_http::p2::types::HostResponseOutparam>,
    tick: Duration,
) -> wasmtime::Result<()> {
    let progress = store.data().progress.clone();
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let started = Instant::now();
    let proxy = pre
        .instantiate_async(&mut *store)
        .instrument(tracing::info_span!(target: crate::span::SPAN_TARGET, "instantiate"))
        .await?;
    progress.instantiate_ns.store(nanos(started.elapsed()), Relaxed);
    let started = Instant::now();
    let result = {
        let handler = proxy.wasi_http_incoming_handler();
        let handle = std::pin::pin!(handler.call_handle(&mut *store, incoming, outparam));
        let span = tracing::info_span!(target: crate::span::SPAN_TARGET, "guest", cpu_us = Empty);
        let (result, cpu) =
            cpu::metered(handle, tick, &progress.cpu_ns).instrument(span.clone()).await;
        span.record("cpu_us", cpu.as_micros() as u64);
        result
    };
    progress.guest_ns.store(nanos(started.elapsed()), Relaxed);
    let state = store.data_mut();
    result.map_err(|error| {
        if error.downcast_ref::<wasmtime::Trap>().is_some() {
            return error;
        }
        // A full resource table is the limit on what the guest holds in the host.
        if matches!(error.downcast_ref(), Some(ResourceTableError::Full)) {
            state.meter.memory_refused = true;
        }
        error.context(Refused)
    })
}

/// The request as wasi-http takes it: with an authority (the `Host` header's, else
/// `localhost`), which `new_incoming_request` requires.
fn incoming(request: GuestRequest) -> http::Request<Full<Bytes>> {
    let GuestRequest { method, uri, mut headers, body, .. } = request;
    if uri.authority().is_none() && !headers.contains_key(http::header::HOST) {
        headers.insert(http::header::HOST, http::HeaderValue::from_static("localhost"));
    }
    let mut incoming = http::Request::new(Full::new(body));
    *incoming.method_mut() = method;
    *incoming.uri_mut() = uri;
    *incoming.headers_mut() = headers;
    incoming
}

/// How much of a component's answer is read before its head is sent: an answer that ends
/// within it is sent whole, checked and costed like a module's; a longer one is streamed.
const BUFFER: usize = 64 << 10;

/// A component's answer as far as it was read.
enum Buffered {
    /// It ended within [`BUFFER`] (or failed): checked.
    Whole(Result<GuestOutcome, ExecError>),
    /// It goes on past [`BUFFER`]: the head, what was read, and the rest to stream.
    Partial {
        parts: http::response::Parts,
        prefix: Bytes,
        rest: wasmtime_wasi_http::p2::body::HyperOutgoingBody,
    },
}

/// The component's answer, its body read up to [`BUFFER`] within the worker's limit; whole,
/// checked by the rules a module's answer follows.
async fn buffer(
    response: http::Response<wasmtime_wasi_http::p2::body::HyperOutgoingBody>,
    limits: &Limits,
) -> Buffered {
    let (parts, mut body) = response.into_parts();
    let mut read = bytes::BytesMut::new();
    loop {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    read.extend_from_slice(&data);
                }
                if read.len() as u64 > limits.response_body {
                    return Buffered::Whole(Err(ExecError::new(
                        ExecErrorKind::ResponseTooLarge,
                        format!("over {} bytes", limits.response_body),
                    )));
                }
                if read.len() > BUFFER {
                    return Buffered::Partial { parts, prefix: read.freeze(), rest: body };
                }
            }
            Some(Err(error)) => {
                return Buffered::Whole(Err(ExecError::new(
                    ExecErrorKind::WorkerFailed,
                    format!("the response body failed: {error}"),
                )));
            }
        }
    }
    let body = read.freeze();
    let len = body.len();
    Buffered::Whole(check_head(&parts, limits, Some(len), || body).map(GuestOutcome::Response))
}

/// The head checked by the rules a module's answer follows, with `body` (`len` bytes, or
/// `None`: still being written, so no `content-length` is kept).
fn check_head(
    parts: &http::response::Parts,
    limits: &Limits,
    len: Option<usize>,
    body: impl FnOnce() -> Bytes,
) -> Result<http::Response<Bytes>, ExecError> {
    let framing = |name: &http::HeaderName| len.is_none() && name == http::header::CONTENT_LENGTH;
    let headers = parts
        .headers
        .iter()
        .filter(|(name, _)| !framing(name))
        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
    let status = parts.status.as_u16();
    crate::outcome::response(status, headers, limits, len.unwrap_or(0), body)
}

/// The guest's stdout and stderr, a log line per line, escaped (a guest cannot forge a log
/// line), under the target module logs use.
fn log_output(state: &ComponentState) {
    let worker = state.worker.name.as_str();
    let request_id = state.request_id;
    for (stream, pipe) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let contents = pipe.contents();
        for line in contents.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let text = String::from_utf8_lossy(line);
            let message = escape_control(&text);
            tracing::info!(target: "edgegate::guest", worker, %request_id, stream, "{message}");
        }
    }
}
