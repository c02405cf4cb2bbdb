//! The gateway: a [`Snapshot`] of everything a request needs (built from a configuration in
//! [`build`], swapped for the next one by a [`reload`]), and the handling of one request from
//! route to response. A request takes the snapshot once at its start and keeps it to its end,
//! so a request in flight across a reload finishes on the version it began with. Sockets live
//! in [`crate::listener`]; this part is driven by any `http::Request`, which is how the tests
//! drive it without a network.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use edgegate_runtime::{
    Forward, GuestOutcome, GuestRequest, RequestId, Runtime, SPAN_TARGET, Usage, Worker,
};
use http::{HeaderValue, Request, Response, header};
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Body;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::task::JoinHandle;
use tracing::Instrument;
use tracing::field::Empty;

use crate::config::{Loaded, ServerConfig};
use crate::error::{ErrorKind, RequestError, Source};
use crate::metrics::{Count, Keyed, Level, Raised, RouteMetrics};
use crate::path::PathRules;
use crate::router::{Match, Router};
use crate::shadow::{Digested, Shadow};
use crate::split::Split;
use crate::upstream::{ConnInfo, Upstream, UpstreamBody};

mod build;
mod reload;

pub use build::{Builtins, runtime_config};
pub use reload::{ReloadError, Reloaded};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the gateway answers with: a body it has whole (a worker's response, an error), or an
/// upstream's, streamed.
pub type ResponseBody = Either<Full<Bytes>, Digested<UpstreamBody>>;

/// What a route leads to, and its metrics.
#[derive(Debug, Clone)]
struct Target {
    action: Action,
    metrics: Arc<RouteMetrics>,
}

/// What serves a route's requests.
#[derive(Debug, Clone)]
enum Action {
    /// A worker.
    Worker(WorkerTarget),
    /// The gateway itself, with a fixed answer (`respond`).
    Respond(Response<Bytes>),
    /// An upstream, the request proxied as it came (`upstream`).
    Upstream(UpstreamTarget),
    /// One of several targets, chosen per request (`split`).
    Split(Arc<Split<SplitTarget>>),
}

/// One target of a split: a worker or an upstream, and its counters.
#[derive(Debug)]
struct SplitTarget {
    action: Action,
    /// `edgegate_split_total{route,target,by}`, by [`By`](crate::split::By) in declaration
    /// order.
    decided: [Arc<Count>; 4],
    /// The route's name, for the fallback counter.
    route: String,
    /// This target's name.
    name: String,
    /// `edgegate_split_fallbacks_total{route,target,reason}`, by reason.
    fallbacks: Keyed<&'static str, Arc<Count>>,
}

impl SplitTarget {
    /// Counts a request that falls back to this target after the other failed with `reason`.
    fn fell_back(&self, reason: &'static str) {
        let make = || {
            let labels = vec![
                ("route", self.route.clone()),
                ("target", self.name.clone()),
                ("reason", reason.to_owned()),
            ];
            crate::metrics::counter("edgegate_split_fallbacks_total", labels)
        };
        self.fallbacks.with(reason, make, |count| count.increment(1));
    }
}

/// A route's upstream.
#[derive(Debug, Clone)]
struct UpstreamTarget {
    upstream: Arc<Upstream>,
    /// The server's request body limit.
    body_limit: u64,
}

/// A route's worker, with what the route allows it.
#[derive(Debug, Clone)]
struct WorkerTarget {
    worker: Worker,
    /// The smaller of the server's and the worker's request body limits.
    body_limit: u64,
    /// The upstreams the worker may forward to.
    grants: Arc<[String]>,
}

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
    runtime: Runtime,
    /// What a reload needs that no request does; held while one runs, so reloads take turns.
    reloads: tokio::sync::Mutex<reload::Reloads>,
    /// TLS session cache and ticket keys, kept across reloads so sessions stay resumable;
    /// with `[server.tls]` only.
    sessions: Option<crate::tls::Sessions>,
    /// The admin token, which a split's override header needs.
    pub(crate) token: crate::admin::Token,
}

/// One version of the configuration, whole: workers loaded, routes compiled, upstream pools
/// open, keys loaded, limits in force.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// 1 at start, one more for each reload that took effect.
    generation: u64,
    /// The configuration it was built from.
    loaded: Loaded,
    router: Router<Target>,
    server: ServerConfig,
    path_rules: PathRules,
    upstreams: HashMap<String, Arc<Upstream>>,
    /// Every loaded worker by name, in name order.
    workers: Vec<(String, Worker)>,
    /// `edgegate_worker_info{worker,digest}` of each of `workers`, in the same order: the
    /// series goes when the last snapshot holding it does.
    worker_info: Vec<Arc<Level>>,
    /// The KV namespaces, shared with the snapshots before and after it while `[kv]` is
    /// unchanged.
    kv: Arc<build::Kv>,
    /// The TLS listener's configuration: certificates, versions, client authorities.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// JWKS refreshers and demo origins, stopped when the last request on this snapshot ends.
    _background: Background,
}

/// Tasks that live as long as the gateway.
#[derive(Debug, Default)]
struct Background(Vec<JoinHandle<()>>);

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
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
            in_flight: crate::metrics::gauge("edgegate_requests_in_flight", Vec::new()),
            queued: crate::metrics::gauge("edgegate_requests_queued", Vec::new()),
            slots_in_use: crate::metrics::gauge("edgegate_instance_slots_in_use", Vec::new()),
        }
    }
}

/// What one request did, kept for its log line, metrics and `server-timing`.
#[derive(Default)]
struct Logged<'a> {
    route: Option<&'a str>,
    worker: Option<&'a str>,
    /// The short form of the worker's module digest: which version served.
    digest: Option<&'a str>,
    upstream: Option<&'a str>,
    metrics: Option<&'a RouteMetrics>,
    usage: Usage,
    /// Time to the upstream's response head.
    upstream_time: Option<Duration>,
    /// The split target chosen, on a split route.
    target: Option<&'a str>,
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

    /// Every worker the current snapshot serves, by name, in name order.
    pub fn workers(&self) -> Vec<(String, Worker)> {
        self.current.load().workers.clone()
    }

    /// The files a reload reads: the configuration file (if there is one) and every worker's
    /// module file (`builtin:` modules have none).
    pub fn files(&self) -> Vec<std::path::PathBuf> {
        let snapshot = self.current.load();
        let loaded = &snapshot.loaded;
        let modules = loaded.config.workers.values().map(|w| w.module.as_str());
        let modules = modules.filter(|m| !m.starts_with(build::BUILTIN_PREFIX));
        let modules = modules.map(|m| loaded.resolve(m.as_ref()));
        loaded.path.clone().into_iter().chain(modules).collect()
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
        let span = tracing::info_span!(
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
        );
        let trace_id = crate::trace::continue_from(request.headers(), &span);
        let method = request.method().clone();
        let uri = request.uri().clone();
        let mut logged = Logged::default();
        let result =
            self.dispatch(&snapshot, request, conn, id, &mut logged).instrument(span.clone()).await;
        let (mut response, error) = match result {
            Ok(response) => (response, None),
            Err(error) => (error.response(id).map(Either::Left), Some(error)),
        };
        let status = response.status().as_u16();
        span.record("http.response.status_code", status);
        if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
            response.headers_mut().insert("x-request-id", value);
        }
        if snapshot.server.server_timing
            && let Some(timing) = server_timing(&logged)
            && let Ok(value) = HeaderValue::from_str(&timing)
        {
            response.headers_mut().insert("server-timing", value);
        }
        let elapsed = started.elapsed();
        let metrics = logged.metrics.unwrap_or(&self.unrouted);
        let source = error.as_ref().map_or("-", |e| e.kind.source().as_str());
        metrics.request(status, source, elapsed);
        metrics.usage(&logged.usage);
        if let Some(error) = &error {
            metrics.failure(logged.worker.unwrap_or("-"), error);
        }
        access_log(&Access {
            id,
            trace_id: trace_id.as_deref(),
            method: &method,
            path: uri.path(),
            logged: &logged,
            conn,
            status,
            elapsed,
            error: error.as_ref(),
        });
        response
    }

    async fn dispatch<'a, B>(
        &'a self,
        snapshot: &'a Arc<Snapshot>,
        request: Request<B>,
        conn: ConnInfo,
        id: RequestId,
        logged: &mut Logged<'a>,
    ) -> Result<Response<ResponseBody>, RequestError>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        if request.headers().len() > snapshot.server.max_headers {
            return Err(RequestError::new(
                ErrorKind::TooManyHeaders,
                format!("{} headers", request.headers().len()),
            ));
        }
        let (mut parts, body) = request.into_parts();
        crate::authority::settle(&mut parts)
            .map_err(|e| RequestError::new(ErrorKind::InvalidHost, e.to_string()))?;
        normalize_path(&mut parts.uri, &snapshot.path_rules)?;
        let host = crate::authority::of(&parts.uri, &parts.headers);
        let route = match snapshot.router.route(host, parts.uri.path(), &parts.method) {
            Match::Found(route) => route,
            Match::MethodNotAllowed(allowed) => {
                return Err(RequestError::new(ErrorKind::MethodNotAllowed(allowed), ""));
            }
            Match::NotFound => return Err(RequestError::new(ErrorKind::NoRoute, "")),
        };
        logged.route = Some(&route.name);
        logged.metrics = Some(&route.target.metrics);
        let span = tracing::Span::current();
        span.record("route", route.name.as_str());
        let mut action = &route.target.action;
        let (mut fallback, mut shadow) = (None, None);
        if let Action::Split(split) = action {
            let (name, chosen, by) = split.choose(&parts, &self.token);
            chosen.decided[by as usize].increment(1);
            logged.target = Some(name);
            action = &chosen.action;
            fallback = split.fallback(name).filter(|_| parts.method.is_idempotent());
            shadow = split.shadow(name);
        }
        // The override's headers name a target and carry the admin token: neither goes on. The
        // shadow marker is the gateway's to set: a client's copy would pass for a shadow.
        parts.headers.remove(crate::split::OVERRIDE);
        parts.headers.remove(crate::split::OVERRIDE_TOKEN);
        parts.headers.remove(crate::shadow::MARKER);
        let body_limit = match action {
            Action::Respond(fixed) => return Ok(fixed.clone().map(|b| Either::Left(Full::new(b)))),
            Action::Worker(target) => target.body_limit,
            Action::Upstream(target) => target.body_limit,
            // Building gives a split only workers and upstreams as targets.
            Action::Split(_) => {
                let internal = ErrorKind::Exec(edgegate_runtime::ExecErrorKind::Internal);
                return Err(RequestError::new(internal, "a split inside a split"));
            }
        };
        let body = read_body(&parts.headers, body, body_limit, &snapshot.server).await?;
        let request = GuestRequest {
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            body,
            tls: conn.tls.is_some(),
        };
        // Copies for the fallback and the shadow (the body is shared, not copied).
        let retry = fallback.map(|target| (target, request.clone()));
        let shadow = shadow.and_then(|(target, shadow)| {
            let place = shadow.place(&request.method, request.body.len())?;
            let mut copy = request.clone();
            copy.headers.insert(crate::shadow::MARKER, HeaderValue::from_static("1"));
            Some(Shadowing {
                action: target.action.clone(),
                shadow: shadow.clone(),
                place,
                request: copy,
            })
        });
        let served = match self.serve(action, request, conn, id, snapshot, logged).await {
            Err(error) if matches!(error.kind, ErrorKind::Exec(_)) && retry.is_some() => {
                let Some(((name, target), request)) = retry else { return Err(error) };
                target.fell_back(error.kind.code());
                tracing::warn!(
                    route = %route.name,
                    from = logged.target.unwrap_or("-"),
                    to = name,
                    error = error.kind.code(),
                    "split fallback: the worker failed before answering"
                );
                logged.target = Some(name);
                // The fallback's answer is not the side the shadow compares with.
                return self.serve(&target.action, request, conn, id, snapshot, logged).await;
            }
            result => result,
        };
        match (served, shadow) {
            (Ok(response), Some(shadowing)) => {
                Ok(self.shadow(shadowing, response, conn, id, snapshot.clone()).await)
            }
            (served, _) => served,
        }
    }

    /// Starts the shadow of a request whose primary answered `response`, and returns the
    /// response, its body tapped for the comparison. The shadow runs on its own task.
    async fn shadow(
        &self,
        shadowing: Shadowing,
        response: Response<ResponseBody>,
        conn: ConnInfo,
        id: RequestId,
        snapshot: Arc<Snapshot>,
    ) -> Response<ResponseBody> {
        let Shadowing { action, shadow, place, request } = shadowing;
        let (parts, body) = response.into_parts();
        let (done, primary_body) = tokio::sync::oneshot::channel();
        let body = match body {
            // A worker's answer is whole already: hashed now.
            Either::Left(full) => {
                let bytes = full.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
                let _ = done.send(digest.as_ref().try_into().unwrap_or([0; 32]));
                Either::Left(Full::new(bytes))
            }
            Either::Right(mut streamed) => {
                streamed.tap(done);
                Either::Right(streamed)
            }
        };
        let status = parts.status.as_u16();
        let primary_headers = parts.headers.clone();
        let slot = match &action {
            // A worker's shadow takes an instance slot if one is free, never waiting.
            Action::Worker(_) => match self.permits.clone().try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) => {
                    shadow.count(crate::shadow::Outcome::Skipped);
                    return Response::from_parts(parts, body);
                }
            },
            _ => None,
        };
        tokio::spawn(async move {
            let _held = (place, slot);
            let answered = tokio::time::timeout(shadow.timeout, async {
                let response = shadow_answer(&action, request, conn, id, &snapshot).await?;
                let (head, body) = response.into_parts();
                let digest = crate::shadow::digest_of(body, SHADOW_BODY_CAP).await?;
                Some(shadow.seen(head.status.as_u16(), &head.headers, digest))
            })
            .await;
            let Ok(Some(seen)) = answered else {
                return shadow.count(crate::shadow::Outcome::ShadowError);
            };
            // The client went away before the primary's body ended: nothing to compare.
            let Ok(digest) = primary_body.await else {
                return shadow.count(crate::shadow::Outcome::Skipped);
            };
            let primary = shadow.seen(status, &primary_headers, digest);
            shadow.judge(&primary, &seen, &id.to_string());
        });
        Response::from_parts(parts, body)
    }

    /// Serves `request` with a worker or an upstream.
    async fn serve<'a>(
        &'a self,
        action: &'a Action,
        request: GuestRequest,
        conn: ConnInfo,
        id: RequestId,
        snapshot: &'a Snapshot,
        logged: &mut Logged<'a>,
    ) -> Result<Response<ResponseBody>, RequestError> {
        let target = match action {
            Action::Worker(target) => target,
            Action::Upstream(target) => {
                let upstream = target.upstream.name().to_owned();
                let forward = Forward { upstream, edits: Vec::new(), request };
                return proxy(&target.upstream, forward, conn, snapshot, logged).await;
            }
            Action::Respond(_) | Action::Split(_) => {
                let internal = ErrorKind::Exec(edgegate_runtime::ExecErrorKind::Internal);
                return Err(RequestError::new(internal, "not a worker or an upstream"));
            }
        };
        logged.worker = Some(target.worker.name());
        logged.digest = Some(target.worker.short_digest());
        let span = tracing::Span::current();
        span.record("worker", target.worker.name());
        span.record("worker.digest", target.worker.short_digest());
        // The slot is held while the guest runs, not while an upstream answers.
        let outcome = {
            let _slot = self.acquire(snapshot.server.queue_timeout).await?;
            let (outcome, usage) = target.worker.handle_measured(request, id).await;
            logged.usage = usage;
            outcome?
        };
        match outcome {
            GuestOutcome::Response(response) => Ok(response.map(|b| Either::Left(Full::new(b)))),
            GuestOutcome::Forward(forward) => {
                let upstream = snapshot.granted(target, &forward)?;
                proxy(upstream, forward, conn, snapshot, logged).await
            }
        }
    }

    /// A concurrency slot, waiting at most `queue_timeout` for one.
    async fn acquire(
        &self,
        queue_timeout: Duration,
    ) -> Result<(SemaphorePermit<'_>, Raised<'_>), RequestError> {
        if let Ok(permit) = self.permits.try_acquire() {
            return Ok((permit, Raised::new(&self.gauges.slots_in_use)));
        }
        let waiting = Raised::new(&self.gauges.queued);
        let acquired = tokio::time::timeout(queue_timeout, self.permits.acquire()).await;
        drop(waiting);
        match acquired {
            Ok(Ok(permit)) => Ok((permit, Raised::new(&self.gauges.slots_in_use))),
            _ => Err(RequestError::new(
                ErrorKind::Overloaded,
                format!("{} requests in flight", self.runtime.config().max_instances),
            )),
        }
    }
}

impl Snapshot {
    /// The upstream a forward names, if the worker may use it.
    fn granted(&self, target: &WorkerTarget, forward: &Forward) -> Result<&Upstream, RequestError> {
        let name = forward.upstream.as_str();
        if !target.grants.iter().any(|granted| granted == name) {
            let kind = if self.upstreams.contains_key(name) {
                ErrorKind::UpstreamNotGranted
            } else {
                ErrorKind::UnknownUpstream
            };
            return Err(RequestError::new(
                kind,
                format!("worker `{}` forwarded to `{name}`", target.worker.name()),
            ));
        }
        // Validation made sure every grant names an upstream.
        self.upstreams.get(name).map(|u| &**u).ok_or_else(|| {
            RequestError::new(ErrorKind::UnknownUpstream, format!("no upstream `{name}`"))
        })
    }
}

/// The most of a shadow's response body read for its hash; a longer one is a shadow error.
const SHADOW_BODY_CAP: usize = 16 << 20;

/// A request to shadow, and where.
struct Shadowing {
    action: Action,
    shadow: Arc<Shadow>,
    /// The shadow's place under the route's `concurrency`.
    place: tokio::sync::OwnedSemaphorePermit,
    request: GuestRequest,
}

/// The shadow target's answer to `request`: a worker's (or the upstream it forwards to), or
/// an upstream's; `None` when it failed.
async fn shadow_answer(
    action: &Action,
    request: GuestRequest,
    conn: ConnInfo,
    id: RequestId,
    snapshot: &Snapshot,
) -> Option<Response<ResponseBody>> {
    let trust = snapshot.server.trust_forwarded;
    let forward = match action {
        Action::Upstream(target) => {
            let upstream = target.upstream.name().to_owned();
            let forward = Forward { upstream, edits: Vec::new(), request };
            let response = target.upstream.send(forward, conn, trust).await.ok()?;
            return Some(response.map(|body| Either::Right(Digested::new(body))));
        }
        Action::Worker(target) => match target.worker.handle_measured(request, id).await.0.ok()? {
            GuestOutcome::Response(response) => {
                return Some(response.map(|b| Either::Left(Full::new(b))));
            }
            GuestOutcome::Forward(forward) => (snapshot.granted(target, &forward).ok()?, forward),
        },
        Action::Respond(_) | Action::Split(_) => return None,
    };
    let (upstream, forward) = forward;
    let response = upstream.send(forward, conn, trust).await.ok()?;
    Some(response.map(|body| Either::Right(Digested::new(body))))
}

/// Proxies `forward` to `upstream` in its own span, timing it for the log.
async fn proxy<'a>(
    upstream: &'a Upstream,
    forward: Forward,
    conn: ConnInfo,
    snapshot: &Snapshot,
    logged: &mut Logged<'a>,
) -> Result<Response<ResponseBody>, RequestError> {
    logged.upstream = Some(upstream.name());
    let started = Instant::now();
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "upstream",
        otel.kind = "client",
        upstream = upstream.name(),
    );
    let sent = upstream.send(forward, conn, snapshot.server.trust_forwarded);
    let response = sent.instrument(span).await;
    logged.upstream_time = Some(started.elapsed());
    Ok(response?.map(|body| Either::Right(Digested::new(body))))
}

/// Puts the normal form of the path in `uri` (see [`crate::path`]), keeping the query.
fn normalize_path(uri: &mut http::Uri, rules: &PathRules) -> Result<(), RequestError> {
    let invalid =
        |e: &dyn std::fmt::Display| RequestError::new(ErrorKind::InvalidPath, e.to_string());
    let Some(path) = crate::path::normalize(uri.path(), rules).map_err(|e| invalid(&e))? else {
        return Ok(());
    };
    let target = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = std::mem::take(uri).into_parts();
    parts.path_and_query = Some(target.parse().map_err(|e| invalid(&e))?);
    *uri = http::Uri::from_parts(parts).map_err(|e| invalid(&e))?;
    Ok(())
}

/// Reads the whole body, at most `limit` bytes, within `body_read_timeout`.
async fn read_body<B>(
    headers: &http::HeaderMap,
    body: B,
    limit: u64,
    server: &ServerConfig,
) -> Result<Bytes, RequestError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let too_large = |detail: String| RequestError::new(ErrorKind::BodyTooLarge, detail);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(declared) = declared.filter(|&d| d > limit) {
        return Err(too_large(format!("content-length {declared} over the limit of {limit}")));
    }
    let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match tokio::time::timeout(server.body_read_timeout, limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(too_large(format!("body over the limit of {limit}")))
        }
        Ok(Err(e)) => {
            Err(RequestError::new(ErrorKind::BadRequest, format!("reading the body: {e}")))
        }
        Err(_) => Err(RequestError::new(
            ErrorKind::BodyTimeout,
            format!("body not complete after {:?}", server.body_read_timeout),
        )),
    }
}

/// One request's access log line.
struct Access<'a> {
    id: RequestId,
    trace_id: Option<&'a str>,
    method: &'a http::Method,
    path: &'a str,
    logged: &'a Logged<'a>,
    conn: ConnInfo,
    status: u16,
    elapsed: Duration,
    error: Option<&'a RequestError>,
}

/// One line per request, at a level set by who failed: info for success and client errors,
/// warn for workers, error for the host.
fn access_log(access: &Access<'_>) {
    let Access { id, method, path, logged, status, error, .. } = *access;
    let trace_id = access.trace_id.unwrap_or("-");
    let route = logged.route.unwrap_or("-");
    let worker = logged.worker.unwrap_or("-");
    let digest = logged.digest.unwrap_or("-");
    let upstream = logged.upstream.unwrap_or("-");
    let target = logged.target.unwrap_or("-");
    let (tls, alpn) = access.conn.tls.map_or(("-", "-"), |t| (t.version, t.alpn));
    let duration_us = access.elapsed.as_micros() as u64;
    let cpu_us = logged.usage.cpu.as_micros() as u64;
    let memory_peak = logged.usage.memory_peak;
    let source = error.map_or("-", |e| e.kind.source().as_str());
    let code = error.map_or("-", |e| e.kind.code());
    let detail = error.map_or("", |e| e.detail.as_str());
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                target: "edgegate::access",
                $level,
                request_id = %id,
                trace_id,
                %method,
                path,
                route,
                target,
                worker,
                digest,
                upstream,
                tls,
                alpn,
                status,
                duration_us,
                cpu_us,
                memory_peak,
                source,
                error = code,
                detail,
            )
        };
    }
    match error.map(|e| e.kind.source()) {
        None | Some(Source::Client) => line!(tracing::Level::INFO),
        Some(Source::Worker | Source::Upstream) => line!(tracing::Level::WARN),
        Some(Source::Host) => line!(tracing::Level::ERROR),
    }
}

/// The `server-timing` value (durations in milliseconds): `instantiate`, `guest` and
/// `upstream`, those the request reached; `None` if it reached none.
fn server_timing(logged: &Logged<'_>) -> Option<String> {
    let usage = &logged.usage;
    let mut parts = Vec::with_capacity(3);
    if !usage.instantiate.is_zero() {
        parts.push(("instantiate", usage.instantiate));
        parts.push(("guest", usage.guest));
    }
    if let Some(upstream) = logged.upstream_time {
        parts.push(("upstream", upstream));
    }
    if parts.is_empty() {
        return None;
    }
    let parts: Vec<String> = parts
        .into_iter()
        .map(|(name, d)| format!("{name};dur={:.3}", d.as_secs_f64() * 1000.0))
        .collect();
    Some(parts.join(", "))
}

/// Unique request ids: a random start, then counting.
#[derive(Debug)]
struct RequestIds {
    start: u64,
    next: AtomicU64,
}

impl RequestIds {
    fn new() -> Self {
        let mut bytes = [0u8; 8];
        // A fixed start would only make ids less unique across restarts.
        let _ = getrandom::fill(&mut bytes);
        Self { start: u64::from_le_bytes(bytes), next: AtomicU64::new(0) }
    }

    fn next(&self) -> RequestId {
        RequestId(self.start.wrapping_add(self.next.fetch_add(1, Ordering::Relaxed)))
    }
}
