//! One request's path from route to response, in named steps:
//!
//! ```text
//!   admit (header count) ─▶ locate (host, path, route) ─▶ identify (the route's bearer
//!     token, verified; its claims as headers) ─▶ choose (a split's target)
//!     ─▶ strip the gateway's own headers ─▶ read the body (its limit, its deadline)
//!     ─▶ serve (a worker in an instance slot, or an upstream) ─┬▶ the response
//!        on a worker's failure, a split's idempotent request ──┘   (and, on a split
//!        is served again by its fallback target                     route, its shadow)
//! ```

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use edgegate_runtime::{Forward, GuestOutcome, GuestRequest, RequestId, SPAN_TARGET};
use http::request::Parts;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use hyper::body::Body;
use tracing::Instrument;

use super::shadowing::Shadowing;
use super::share::Share;
use super::snapshot::{Action, Snapshot, SplitTarget, Target};
use super::streamed::{Held, Streamed};
use super::tenants::Tenant;
use super::{BoxError, Gateway, ResponseBody};
use crate::config::ServerConfig;
use crate::error::{ErrorKind, RequestError};
use crate::forward::upstream::Upstream;
use crate::listen::conn::ConnInfo;
use crate::observe::access::Logged;
use crate::route::path::PathRules;
use crate::route::rate_key::Facts;
use crate::route::router::{Match, Route};
use crate::route::shadow::Digested;

/// The action a request is served by, and what its route does if it fails or is shadowed.
struct Chosen<'a> {
    action: &'a Action,
    /// The fallback target, for an idempotent request on a split route that names one.
    fallback: Option<(&'a str, &'a SplitTarget)>,
    /// The shadow target and its settings, on a split route that names one.
    shadow: Option<(&'a SplitTarget, &'a Arc<crate::route::shadow::Shadow>)>,
}

impl Gateway {
    /// Serves one request on `snapshot`, step by step (see the module's diagram).
    pub(super) async fn dispatch<'a, B>(
        &'a self,
        snapshot: &'a Arc<Snapshot>,
        request: Request<B>,
        conn: ConnInfo,
        id: RequestId,
        logged: &mut Logged<'a>,
        routed: &mut Option<&'a Target>,
    ) -> Result<Response<ResponseBody>, RequestError>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        admit(&request, &snapshot.server)?;
        let (mut parts, body) = request.into_parts();
        let route = locate(snapshot, &mut parts)?;
        *routed = Some(&route.target);
        logged.route = Some(&route.name);
        logged.metrics = Some(&route.target.metrics);
        let tenant = route.target.tenant.as_deref();
        logged.tenant = tenant.map(|t| t.name.as_str());
        tracing::Span::current().record("route", route.name.as_str());
        let token = match &route.target.identity {
            Some(identity) => Some(identity.admit(&mut parts.headers)?),
            None => None,
        };
        if !route.target.rate_limits.is_empty() {
            let facts = Facts {
                client: snapshot.trusted_proxies.client(conn.peer.ip(), &parts.headers),
                route: &route.name,
                headers: &parts.headers,
                token: token.as_ref(),
            };
            for limit in &route.target.rate_limits {
                limit.admit(&facts).await?;
            }
        }
        let chosen = self.choose(route, &parts, logged);
        strip_gateway_headers(&mut parts.headers);
        let body_limit = match chosen.action {
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
        logged.request_bytes = body.len() as u64;
        let request = GuestRequest {
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            body,
            tls: conn.tls.is_some(),
        };
        // Copies for the fallback and the shadow (the body is shared, not copied).
        let retry = chosen.fallback.map(|target| (target, request.clone()));
        let shadow = chosen
            .shadow
            .and_then(|(target, shadow)| Shadowing::of(&request, &target.action, shadow));
        // Boxed: a worker's or an upstream's future is kilobytes (Wasmtime's and hyper's
        // state), and this one's would be as large, moved whole each time hyper or the
        // connection moves a request's future, even for a request answered without either.
        let serving =
            Box::pin(self.serve(chosen.action, request, conn, id, snapshot, logged, tenant));
        let served = match serving.await {
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
                let fallback =
                    self.serve(&target.action, request, conn, id, snapshot, logged, tenant);
                return Box::pin(fallback).await;
            }
            result => result,
        };
        match (served, shadow) {
            (Ok(response), Some(shadowing)) => {
                Ok(Box::pin(self.shadow(shadowing, response, conn, id, snapshot.clone())).await)
            }
            (served, _) => served,
        }
    }

    /// The route's action; on a split route, the target chosen for this request (counted),
    /// with its fallback and shadow.
    fn choose<'a>(
        &'a self,
        route: &'a Route<Target>,
        parts: &Parts,
        logged: &mut Logged<'a>,
    ) -> Chosen<'a> {
        let action = &route.target.action;
        let Action::Split(split) = action else {
            return Chosen { action, fallback: None, shadow: None };
        };
        let (name, chosen, by) = split.choose(parts, &self.token);
        chosen.decided.increment(by);
        logged.target = Some(name);
        Chosen {
            action: &chosen.action,
            fallback: split.fallback(name).filter(|_| parts.method.is_idempotent()),
            shadow: split.shadow(name),
        }
    }

    /// Serves `request` with a worker or an upstream; a worker of `tenant` within its share.
    #[allow(clippy::too_many_arguments, reason = "the request, where it came from, and whose")]
    pub(super) async fn serve<'a>(
        &'a self,
        action: &'a Action,
        request: GuestRequest,
        conn: ConnInfo,
        id: RequestId,
        snapshot: &'a Snapshot,
        logged: &mut Logged<'a>,
        tenant: Option<&'a Tenant>,
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
        // The shares and the slot are held while the guest runs, not while an upstream
        // answers; the tenant's share, then the worker's, then a slot, so that a worker past a
        // share holds nothing else while it waits.
        let queue_timeout = snapshot.server.queue_timeout;
        let tenant_share = match tenant {
            Some(tenant) => {
                let whose = format!("tenant {}", tenant.name);
                Some(take_share(&tenant.share, &whose, queue_timeout).await?)
            }
            None => None,
        };
        let share = match &target.share {
            Some(share) => {
                let whose = format!("worker {}", target.worker.name());
                Some(take_share(share, &whose, queue_timeout).await?)
            }
            None => None,
        };
        let slot = self.acquire(queue_timeout).await?;
        let (outcome, usage) = target.worker.handle_measured(request, id).await;
        logged.usage = usage;
        match outcome? {
            GuestOutcome::Response(response) => Ok(response.map(|b| Either::Left(Full::new(b)))),
            // The guest still runs while its answer streams: the body holds its places.
            GuestOutcome::Streamed(response, progress) => {
                let share = share.zip(target.share.as_ref().map(|share| &share.semaphore));
                let tenant_share = tenant_share.zip(tenant.map(|t| &t.share.semaphore));
                let shares = share.into_iter().chain(tenant_share);
                let held = Held::keep(slot, &self.permits, &self.gauges.slots_in_use, shares);
                let streamed = |body| Streamed::guest(body, held, progress);
                Ok(response.map(|body| Either::Right(Digested::new(streamed(body)))))
            }
            GuestOutcome::Forward(forward) => {
                drop((tenant_share, share, slot));
                let upstream = snapshot.granted(target, &forward)?;
                proxy(upstream, forward, conn, snapshot, logged).await
            }
        }
    }
}

/// A place in a share of the instance slots (`whose`: `worker W`, `tenant T`), waiting at
/// most `queue_timeout`.
async fn take_share<'a>(
    share: &'a Share,
    whose: &str,
    queue_timeout: std::time::Duration,
) -> Result<tokio::sync::SemaphorePermit<'a>, RequestError> {
    super::take_place(&share.semaphore, queue_timeout, None).await.ok_or_else(|| {
        RequestError::new(
            ErrorKind::Overloaded,
            format!("{whose} has its share ({}) of the instance slots in flight", share.places),
        )
    })
}

/// Refuses a request with more headers than `server.max_headers`.
fn admit<B>(request: &Request<B>, server: &ServerConfig) -> Result<(), RequestError> {
    let count = request.headers().len();
    if count > server.max_headers {
        return Err(RequestError::new(ErrorKind::TooManyHeaders, format!("{count} headers")));
    }
    Ok(())
}

/// The route a request names: its host settled (see [`crate::route::authority`]) and its
/// path normalized, then matched.
fn locate<'a>(
    snapshot: &'a Snapshot,
    parts: &mut Parts,
) -> Result<&'a Route<Target>, RequestError> {
    crate::route::authority::settle(parts)
        .map_err(|e| RequestError::new(ErrorKind::InvalidHost, e.to_string()))?;
    normalize_path(&mut parts.uri, &snapshot.path_rules)?;
    let host = crate::route::authority::of(&parts.uri, &parts.headers);
    match snapshot.router.route(host, parts.uri.path(), &parts.method) {
        Match::Found(route) => Ok(route),
        Match::MethodNotAllowed(allowed) => {
            Err(RequestError::new(ErrorKind::MethodNotAllowed(allowed), ""))
        }
        Match::NotFound => Err(RequestError::new(ErrorKind::NoRoute, "")),
    }
}

/// Removes the headers only the gateway may speak: a split override's (they name a target and
/// carry the admin token) and the shadow marker (a client's copy would pass for a shadow).
fn strip_gateway_headers(headers: &mut http::HeaderMap) {
    headers.remove(crate::route::split::OVERRIDE);
    headers.remove(crate::route::split::OVERRIDE_TOKEN);
    headers.remove(crate::route::shadow::MARKER);
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
    Ok(response?.map(|body| Either::Right(Digested::new(Streamed::upstream(body)))))
}

/// Puts the normal form of the path in `uri` (see [`crate::route::path`]), keeping the query.
fn normalize_path(uri: &mut http::Uri, rules: &PathRules) -> Result<(), RequestError> {
    let invalid =
        |e: &dyn std::fmt::Display| RequestError::new(ErrorKind::InvalidPath, e.to_string());
    let Some(path) = crate::route::path::normalize(uri.path(), rules).map_err(|e| invalid(&e))?
    else {
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
