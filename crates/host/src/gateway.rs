//! The gateway: a [`Snapshot`] of everything a request needs (built from a configuration in
//! [`build`], swapped for the next one by a [`reload`]), and the handling of one request from
//! route to response: its frame here (id, span, response headers, metrics, access line), its
//! steps in [`dispatch`], a split route's shadow in [`shadowing`]. A request takes the snapshot once at its start and keeps it to its end,
//! so a request in flight across a reload finishes on the version it began with. Sockets live
//! in [`crate::server`]; this part is driven by any `http::Request`, which is how the tests
//! drive it without a network.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use edgegate_runtime::{Runtime, SPAN_TARGET, Worker};
use http::{HeaderValue, Request, Response};
use http_body_util::{Either, Full};
use hyper::body::Body;
use tokio::sync::{Semaphore, SemaphorePermit};
use tracing::Instrument;
use tracing::field::Empty;

use crate::config::ServerConfig;
use crate::error::{ErrorKind, RequestError};
use crate::listen::conn::ConnInfo;
use crate::observe::access::{self, Access, Logged};
use crate::observe::metrics::{Level, Raised, RouteMetrics};
use crate::route::shadow::Digested;
use told::{Head, Pending};

mod build;
mod deploy;
mod dispatch;
mod ids;
mod reload;
mod shadowing;
mod share;
mod snapshot;
mod streamed;
mod tenants;
mod told;

pub use build::{Builtins, runtime_config};
pub use deploy::{DeployError, DeployRequest};
use ids::RequestIds;
pub use reload::{ReloadError, Reloaded};
pub(crate) use snapshot::Snapshot;
pub use streamed::{GuestBody, Streamed};

use share::Share;
use snapshot::{Action, Background, SplitTarget, Target, UpstreamTarget, WorkerTarget};

/// What a reload needs that no request does.
#[derive(Debug)]
struct Reloads {
    builtins: Builtins,
    /// The registry clients `oci://` workers are pulled with, kept from one reload to the
    /// next.
    registries: Arc<crate::registry::Clients>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the gateway answers with: a body it has whole (a worker's response, an error), or one
/// streamed as it arrives (an upstream's, or a component's answer past its buffer).
pub type ResponseBody = Either<Full<Bytes>, Digested<Streamed>>;

/// A running gateway: the snapshot serving, and what outlives snapshots (the engine and its
/// instance pool, the concurrency slots, request ids, the process-wide gauges).
#[derive(Debug)]
pub struct Gateway {
    current: ArcSwap<Snapshot>,
    pub(crate) permits: Arc<Semaphore>,
    ids: RequestIds,
    /// The metrics of requests no route matched.
    unrouted: RouteMetrics,
    gauges: Gauges,
    /// The engine every snapshot's workers are loaded into (its epoch ticker runs while the
    /// gateway lives).
    pub(crate) runtime: Runtime,
    /// What a reload needs that no request does; held while one runs, so reloads take turns.
    reloads: tokio::sync::Mutex<Reloads>,
    /// TLS session cache and ticket keys, kept across reloads so sessions stay resumable;
    /// with `[server.tls]` only.
    sessions: Option<crate::listen::tls::Sessions>,
    /// The admin token, which a split's override header needs.
    pub(crate) token: crate::config::token::Token,
}

/// The process-wide gauges the request path moves.
#[derive(Debug)]
struct Gauges {
    in_flight: Arc<Level>,
    queued: Arc<Level>,
    slots_in_use: Arc<Level>,
}

impl Gauges {
    fn register(slots: u32) -> Self {
        metrics::gauge!("edgegate_instance_slots").set(f64::from(slots));
        Self {
            in_flight: crate::observe::metrics::gauge("edgegate_requests_in_flight", Vec::new()),
            queued: crate::observe::metrics::gauge("edgegate_requests_queued", Vec::new()),
            slots_in_use: crate::observe::metrics::gauge(
                "edgegate_instance_slots_in_use",
                Vec::new(),
            ),
        }
    }
}

impl Gateway {
    /// The server settings in force.
    pub fn server(&self) -> ServerConfig {
        self.current.load().server.clone()
    }

    /// The TLS configuration a connection accepted now is handshaken with.
    pub(crate) fn tls(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.current.load().tls.clone()
    }

    /// How many workers the current snapshot serves.
    pub(crate) fn worker_count(&self) -> usize {
        self.current.load().workers.len()
    }

    /// Every worker the current snapshot serves, by name, in name order.
    pub fn workers(&self) -> Vec<(String, Worker)> {
        let workers = &self.current.load().workers;
        workers.iter().map(|(name, worker)| (name.clone(), worker.clone())).collect()
    }

    /// The files a reload reads: the configuration file (if there is one) and every worker's
    /// module file (`builtin:` and `oci://` modules have none).
    pub fn files(&self) -> Vec<std::path::PathBuf> {
        let snapshot = self.current.load();
        let loaded = &snapshot.loaded;
        let modules = loaded.config.workers.values().map(|w| w.module.as_str());
        let modules = modules.filter(|m| crate::config::names_a_file(m));
        let modules = modules.map(|m| loaded.resolve(m.as_ref()));
        loaded.path.clone().into_iter().chain(modules).collect()
    }

    /// The manifest digest (`sha256:…`) each `oci://` module of the configuration serving
    /// resolved to, by reference.
    pub fn resolved(&self) -> std::collections::BTreeMap<String, String> {
        let pulled = &self.current.load().pulled;
        pulled
            .iter()
            .map(|(reference, manifest)| (reference.clone(), manifest.to_string()))
            .collect()
    }

    /// The generation serving: 1 at start, one more for each reload that took effect.
    pub fn generation(&self) -> u64 {
        self.current.load().generation
    }

    /// Serves one request: route, read the body within its limits, wait for a concurrency
    /// slot, run the worker, and write one access log line. Never fails: every error becomes
    /// its response.
    pub async fn handle<B>(&self, request: Request<B>, conn: ConnInfo) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let snapshot = self.current.load_full();
        let id = self.ids.next();
        let started = Instant::now();
        let _in_flight = Raised::new(&self.gauges.in_flight);
        // A request that is not sampled has no spans at all (see `observe::trace`).
        let client = crate::observe::trace::client(request.headers());
        let span = if !crate::observe::trace::sampled(client.as_ref(), id) {
            tracing::Span::none()
        } else {
            tracing::info_span!(
                target: SPAN_TARGET,
                "request",
                otel.kind = "server",
                http.request.method = %request.method(),
                url.path = request.uri().path(),
                request_id = %id,
                route = Empty,
                worker = Empty,
                worker.digest = Empty,
                http.response.status_code = Empty,
            )
        };
        let trace_id = crate::observe::trace::continue_from(client, &span);
        let method = request.method().clone();
        let uri = request.uri().clone();
        let mut logged = Logged::default();
        let mut routed = None;
        // Awaited where it is made when there is no span to enter: wrapping it would move the
        // dispatch's future (kilobytes) twice more per request.
        let dispatched = self.dispatch(&snapshot, request, conn, id, &mut logged, &mut routed);
        let result = if span.is_none() {
            dispatched.await
        } else {
            dispatched.instrument(span.clone()).await
        };
        let (mut response, error) = match result {
            Ok(response) => (response, None),
            Err(error) => (error.response(id).map(Either::Left), Some(error)),
        };
        let status = response.status().as_u16();
        span.record("http.response.status_code", status);
        if let Ok(value) = HeaderValue::from_bytes(&id.hex()) {
            response.headers_mut().insert("x-request-id", value);
        }
        if snapshot.server.server_timing
            && let Some(timing) = access::server_timing(&logged)
            && let Ok(value) = HeaderValue::from_str(&timing)
        {
            response.headers_mut().insert("server-timing", value);
        }
        let elapsed = started.elapsed();
        let metrics = logged.metrics.unwrap_or(&self.unrouted);
        let source = error.as_ref().map_or("-", |e| e.kind.source().as_str());
        metrics.request(status, source, elapsed);
        if let Some(error) = &error {
            metrics.failure(logged.worker.unwrap_or("-"), error);
        }
        let tenant = routed.and_then(|target| target.tenant.as_ref());
        let sent = match response.body_mut() {
            // A streamed answer is told when its body ends: its bytes, its guest's whole cost,
            // and whether it was cut.
            Either::Right(streamed) => match routed {
                Some(target) => {
                    let path = uri.path();
                    let trace_id = trace_id.as_deref();
                    let head = Head { id, trace_id, method: &method, path, conn, status, started };
                    let metrics = target.metrics.clone();
                    let pending = Pending::new(head, &logged, metrics, tenant.cloned());
                    streamed.get_mut().tell_at_end(pending);
                    return response;
                }
                None => 0,
            },
            // A HEAD's body is never sent.
            Either::Left(_) if method == http::Method::HEAD => 0,
            Either::Left(whole) => whole.size_hint().exact().unwrap_or(0),
        };
        logged.response_bytes = sent;
        let access = Access {
            id,
            trace_id: trace_id.as_deref(),
            method: &method,
            path: uri.path(),
            logged: &logged,
            conn,
            status,
            elapsed,
            error: error.as_ref(),
        };
        told::tell(&access, metrics, tenant.map(|t| &**t));
        response
    }

    /// A concurrency slot, waiting at most `queue_timeout` for one.
    async fn acquire(
        &self,
        queue_timeout: Duration,
    ) -> Result<(SemaphorePermit<'_>, Raised<'_>), RequestError> {
        match take_place(&self.permits, queue_timeout, Some(&self.gauges.queued)).await {
            Some(permit) => Ok((permit, Raised::new(&self.gauges.slots_in_use))),
            None => Err(RequestError::new(
                ErrorKind::Overloaded,
                format!("{} requests in flight", self.runtime.config().max_instances),
            )),
        }
    }
}

/// A place in `places`: at once if one is free, else the first within `timeout`, with
/// `waiting` raised while it waits. `None` when none came in time.
async fn take_place<'a>(
    places: &'a Semaphore,
    timeout: Duration,
    waiting: Option<&Level>,
) -> Option<SemaphorePermit<'a>> {
    if let Ok(place) = places.try_acquire() {
        return Some(place);
    }
    let _waiting = waiting.map(Raised::new);
    tokio::time::timeout(timeout, places.acquire()).await.ok()?.ok()
}
