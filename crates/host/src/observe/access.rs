//! The access log: one line per request (target `edgegate::access`), at a level set by who
//! failed, and the `server-timing` header, both from what the request did ([`Logged`]).

use std::time::Duration;

use edgegate_runtime::{RequestId, Usage};

use crate::error::{RequestError, Source};
use crate::listen::conn::ConnInfo;
use crate::observe::metrics::RouteMetrics;

/// What one request did, kept for its log line, metrics and `server-timing`.
#[derive(Default)]
pub(crate) struct Logged<'a> {
    pub(crate) route: Option<&'a str>,
    pub(crate) worker: Option<&'a str>,
    /// The short form of the worker's module digest: which version served.
    pub(crate) digest: Option<&'a str>,
    pub(crate) upstream: Option<&'a str>,
    pub(crate) metrics: Option<&'a RouteMetrics>,
    pub(crate) usage: Usage,
    /// Time to the upstream's response head.
    pub(crate) upstream_time: Option<Duration>,
    /// The split target chosen, on a split route.
    pub(crate) target: Option<&'a str>,
}

/// One request's access log line.
pub(crate) struct Access<'a> {
    pub(crate) id: RequestId,
    pub(crate) trace_id: Option<&'a str>,
    pub(crate) method: &'a http::Method,
    pub(crate) path: &'a str,
    pub(crate) logged: &'a Logged<'a>,
    pub(crate) conn: ConnInfo,
    pub(crate) status: u16,
    pub(crate) elapsed: Duration,
    pub(crate) error: Option<&'a RequestError>,
}

/// One line per request, at a level set by who failed: info for success and client errors,
/// warn for workers and upstreams, error for the host.
pub(crate) fn log(access: &Access<'_>) {
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

/// The `server-timing` value (durations in milliseconds): `load` (when the worker's code was
/// not resident), `instantiate`, `guest` and `upstream`, those the request reached; `None` if
/// it reached none.
pub(crate) fn server_timing(logged: &Logged<'_>) -> Option<String> {
    let usage = &logged.usage;
    let mut parts = Vec::with_capacity(4);
    if !usage.load.is_zero() {
        parts.push(("load", usage.load));
    }
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
