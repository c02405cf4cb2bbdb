//! Prometheus metrics, served at `/metrics` on the admin listener (docs/observability.md).
//!
//! The process has one recorder ([`install`]); code anywhere (the KV crate included) records
//! through the `metrics` facade. On the request path nothing is looked up by name: each
//! route keeps its handles (`RouteMetrics`), so a request costs a few atomic adds and
//! histogram samples. Before [`install`] (in `edgegate check`, in unit tests) the recorder's
//! handles are no-ops and nothing is rendered.
//!
//! Durations are histograms in seconds with exponential buckets, ×2 from 10 µs to about 10 s;
//! memory is in bytes, ×2 from 64 KiB to 1 GiB. The request path's histograms, gauges and
//! counters, and every series labelled by a route, worker or upstream, are edgegate's own
//! (`series`: fixed atomic buckets, one atomic per gauge or counter), cheaper per sample than
//! the recorder's, and dropped when what they are about is gone (a reload removed it).

mod by_label;
mod series;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use edgegate_runtime::{ExecErrorKind, Usage};
use metrics::Unit;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::error::{ErrorKind, RequestError};
pub(crate) use by_label::{CountsBy, LabelValue};
use series::BYTES;
pub(crate) use series::{Buckets, Count, Keyed, Level, Raised, SECONDS};

/// How often histograms are folded into their buckets when nobody scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The metrics recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("installing the metrics recorder")]
pub struct InstallError(#[source] metrics_exporter_prometheus::BuildError);

/// Installs the process's recorder, describes the metrics and starts the upkeep task (which
/// needs a tokio runtime). Later calls change nothing.
pub fn install() -> Result<(), InstallError> {
    if HANDLE.get().is_some() {
        return Ok(());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS.bounds())
        .map_err(InstallError)?
        .install_recorder()
        .map_err(InstallError)?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP).await;
            upkeep.run_upkeep();
        }
    });
    describe();
    let _ = HANDLE.set(handle);
    Ok(())
}

/// The metrics in Prometheus text format, `None` before [`install`].
pub(crate) fn render() -> Option<String> {
    let handle = HANDLE.get()?;
    metrics::counter!("edgegate_log_lines_dropped_total")
        .absolute(super::log_writer::dropped_lines());
    let mut text = handle.render();
    series::render(&mut text);
    Some(text)
}

/// The resident set's figures as of now: called before each render.
pub(crate) fn record_resident(stats: edgegate_runtime::ResidentStats) {
    metrics::gauge!("edgegate_worker_code_resident").set(stats.resident as f64);
    for (event, count) in [
        ("hit", stats.hits),
        ("load", stats.loads),
        ("load_failed", stats.load_failures),
        ("eviction", stats.evictions),
    ] {
        metrics::counter!("edgegate_worker_code_total", "event" => event).absolute(count);
    }
}

/// What a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram(Unit),
    /// A histogram of the request path's own (`series`).
    Buckets,
    /// A gauge of the request path's own (`series`).
    Level,
    /// A counter of the request path's own (`series`).
    Count,
}

/// Every metric edgegate exports (the KV crate's included), described once at install.
const METRICS: &[(&str, Kind, &str)] = &[
    (
        "edgegate_requests_total",
        Kind::Count,
        "Requests answered, by route, worker, status and error source",
    ),
    (
        "edgegate_request_duration_seconds",
        Kind::Buckets,
        "Time from the request head to the response head",
    ),
    (
        "edgegate_instantiate_duration_seconds",
        Kind::Buckets,
        "Time to instantiate a worker's module for a request",
    ),
    (
        "edgegate_guest_cpu_seconds",
        Kind::Buckets,
        "CPU time of a request's guest code (what the CPU budget counts)",
    ),
    (
        "edgegate_guest_memory_peak_bytes",
        Kind::Buckets,
        "A request's guest linear memory at its peak",
    ),
    ("edgegate_traps_total", Kind::Count, "Guests that trapped, by worker and kind"),
    ("edgegate_limit_hits_total", Kind::Count, "Requests stopped by a limit, by worker and limit"),
    ("edgegate_requests_in_flight", Kind::Level, "Requests being served"),
    ("edgegate_requests_queued", Kind::Level, "Requests waiting for an instance slot"),
    ("edgegate_instance_slots_in_use", Kind::Level, "Instance slots held by running guests"),
    ("edgegate_instance_slots", Kind::Gauge, "Instance slots (server.max_concurrency)"),
    (
        "edgegate_kv_operations_total",
        Kind::Counter,
        "KV operations, by backend, operation and result",
    ),
    (
        "edgegate_kv_duration_seconds",
        Kind::Histogram(Unit::Seconds),
        "KV operation time (redb and Redis; in-memory operations are not timed)",
    ),
    ("edgegate_upstream_duration_seconds", Kind::Buckets, "Time to an upstream's response head"),
    ("edgegate_upstream_errors_total", Kind::Count, "Upstream failures, by upstream and kind"),
    (
        "edgegate_connections_open",
        Kind::Level,
        "Client connections open, by listener (http, tls), from accept to close",
    ),
    (
        "edgegate_connections_closed_total",
        Kind::Counter,
        "Client connections the gateway closed: a timeout (handshake, header block, idle), a client that stopped reading, or a drain",
    ),
    (
        "edgegate_split_total",
        Kind::Count,
        "Split routes' decisions, by route, target and how (override, rule, sticky, random)",
    ),
    (
        "edgegate_split_fallbacks_total",
        Kind::Count,
        "Requests a split's worker failed before answering, served by the fallback target, by reason",
    ),
    (
        "edgegate_rate_limit_decisions_total",
        Kind::Count,
        "Requests a rate-limit policy counted, by policy, route and outcome (allowed, limited, dry_run_limited, no_key, unavailable)",
    ),
    (
        "edgegate_rate_limit_redis_errors_total",
        Kind::Count,
        "Decisions of a shared rate-limit policy that Redis failed to take, by policy and error (timeout, unavailable, skipped while it recovers)",
    ),
    (
        "edgegate_rate_limit_remembered_refusals_total",
        Kind::Count,
        "Requests a shared rate-limit policy refused without asking Redis, which had refused their key until a later moment, by policy",
    ),
    (
        "edgegate_rate_limit_local_fallbacks_total",
        Kind::Count,
        "Decisions of a shared rate-limit policy taken in this process because Redis could not take them (on_error = fail_open), by policy",
    ),
    (
        "edgegate_rate_limited_total",
        Kind::Count,
        "Requests a rate-limit policy refused with 429, by policy and route",
    ),
    (
        "edgegate_split_claims_total",
        Kind::Count,
        "Bearer tokens a split that reads claims verified, by route and outcome (verified, missing, invalid, unavailable)",
    ),
    ("edgegate_fetches_total", Kind::Count, "Workers' outbound requests, by worker and outcome"),
    (
        "edgegate_shadow_total",
        Kind::Count,
        "Split routes' shadows, by route and outcome (match, status_diff, header_diff, body_diff, shadow_error, skipped)",
    ),
    (
        "edgegate_tls_handshakes_total",
        Kind::Counter,
        "TLS handshakes completed, by version and ALPN protocol",
    ),
    (
        "edgegate_tls_handshake_failures_total",
        Kind::Counter,
        "TLS handshakes that failed, by reason: timeout, plain_http, error",
    ),
    ("edgegate_upstream_in_flight", Kind::Level, "Requests waiting on an upstream"),
    (
        "edgegate_upstream_connections",
        Kind::Level,
        "Open connections to an upstream (its pool: idle and busy)",
    ),
    (
        "edgegate_module_cache_total",
        Kind::Counter,
        "Workers' code loaded, by how (hit, miss, rejected, not_stored, precompiled, off)",
    ),
    (
        "edgegate_worker_code_total",
        Kind::Counter,
        "Requests for workers' code, by event: hit (resident), load, load_failed, eviction",
    ),
    (
        "edgegate_worker_code_resident",
        Kind::Gauge,
        "Modules whose compiled code is in memory ([runtime] max_resident caps it)",
    ),
    (
        "edgegate_reloads_total",
        Kind::Counter,
        "Reloads of the configuration and workers, by result (ok, error)",
    ),
    (
        "edgegate_deploys_total",
        Kind::Counter,
        "Workers deployed or removed through the admin API, by action and result (ok, error)",
    ),
    (
        "edgegate_config_generation",
        Kind::Gauge,
        "The generation serving: 1 at start, one more for each reload that took effect",
    ),
    (
        "edgegate_worker_info",
        Kind::Level,
        "1 for each worker's module version serving new requests (digest: its sha256); a version a reload replaced is 0 until its last request ends, then gone",
    ),
    ("edgegate_build_info", Kind::Gauge, "Always 1; the labels name the build"),
    (
        "edgegate_tenant_requests_total",
        Kind::Count,
        "Requests routed to a tenant's routes, by tenant",
    ),
    (
        "edgegate_tenant_cpu_seconds_total",
        Kind::Count,
        "CPU time of a tenant's guests, streamed answers and the host's work for them included, by tenant",
    ),
    (
        "edgegate_tenant_request_bytes_total",
        Kind::Count,
        "Request body bytes a tenant's routes received, by tenant",
    ),
    (
        "edgegate_tenant_response_bytes_total",
        Kind::Count,
        "Response body bytes a tenant's routes sent (as far as sent), by tenant",
    ),
    (
        "edgegate_tenant_kv_operations_total",
        Kind::Count,
        "KV operations a tenant's workers made (a batch counts each key), by tenant",
    ),
    (
        "edgegate_tenant_fetches_total",
        Kind::Count,
        "Outbound requests a tenant's workers started, by tenant",
    ),
    (
        "edgegate_responses_cut_total",
        Kind::Count,
        "Answers cut off after their head was sent, by route, worker and reason (response_too_large, deadline_exceeded, a worker's failure, upstream_body)",
    ),
    (
        "edgegate_log_lines_dropped_total",
        Kind::Counter,
        "Log lines dropped because the log queue was full (stderr not read fast enough)",
    ),
];

fn describe() {
    for &(name, kind, help) in METRICS {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, help),
            Kind::Gauge => metrics::describe_gauge!(name, help),
            Kind::Histogram(unit) => metrics::describe_histogram!(name, unit, help),
            Kind::Buckets | Kind::Level | Kind::Count => {}
        }
    }
    metrics::gauge!(
        "edgegate_build_info",
        "version" => env!("CARGO_PKG_VERSION"),
        "abi" => "v1",
    )
    .set(1.0);
}

/// One response's counter and latency histogram.
struct Outcome {
    requests: Arc<Count>,
    duration: Arc<Buckets>,
}

/// A route's handles, each registered on first use: per status and error source, per trap or
/// limit, and its worker's guest histograms. A worker that serves nothing has no series, so
/// `/metrics` grows with the workers that serve, not with the workers configured.
pub(crate) struct RouteMetrics {
    route: String,
    worker: String,
    /// The tenant whose route it is, if one's: a label of its requests' series.
    tenant: Option<String>,
    /// By status and error source.
    outcomes: Keyed<(u16, &'static str), Outcome>,
    /// `edgegate_traps_total` and `edgegate_limit_hits_total`, by name, label and worker
    /// (a split route's targets are several).
    failures: Keyed<(&'static str, &'static str, String), Arc<Count>>,
    /// `edgegate_responses_cut_total`, by worker and reason.
    cuts: Keyed<(String, String), Arc<Count>>,
    guest: std::sync::OnceLock<Guest>,
}

/// A worker's guest histograms: instantiation, CPU, memory peak.
struct Guest {
    instantiate: Arc<Buckets>,
    cpu: Arc<Buckets>,
    memory: Arc<Buckets>,
}

impl Guest {
    const INSTANTIATE: &str = "edgegate_instantiate_duration_seconds";

    /// `worker`'s series, registered now if need be.
    fn of(worker: &str) -> Self {
        let per_worker = |name, scale| histogram(name, scale, vec![("worker", worker.to_owned())]);
        Self {
            instantiate: per_worker(Self::INSTANTIATE, &SECONDS),
            cpu: per_worker("edgegate_guest_cpu_seconds", &SECONDS),
            memory: per_worker("edgegate_guest_memory_peak_bytes", &BYTES),
        }
    }

    /// `worker`'s series if they are registered (its worker served under the previous
    /// configuration, which still holds them): a reload keeps counting in them.
    fn existing(worker: &str) -> Option<Self> {
        let labels = vec![("worker", worker.to_owned())];
        series::existing_histogram(Self::INSTANTIATE, &labels).map(|_| Self::of(worker))
    }
}

/// The help of `name`, a metric in [`METRICS`].
fn help(name: &str) -> &'static str {
    METRICS.iter().find(|(n, ..)| *n == name).map_or("", |(_, _, help)| help)
}

/// The series of request-path histogram `name` (a [`Kind::Buckets`] metric) with `labels`.
pub(crate) fn histogram(
    name: &'static str,
    scale: &'static series::Scale,
    labels: series::Labels,
) -> Arc<Buckets> {
    series::histogram(name, help(name), scale, labels)
}

/// The series of request-path gauge `name` (a [`Kind::Level`] metric) with `labels`.
pub(crate) fn gauge(name: &'static str, labels: series::Labels) -> Arc<Level> {
    series::gauge(name, help(name), labels)
}

/// The series of counter `name` (a [`Kind::Count`] metric) with `labels`.
pub(crate) fn counter(name: &'static str, labels: series::Labels) -> Arc<Count> {
    series::counter(name, help(name), labels)
}

/// The series of counter `name` (a [`Kind::Count`] metric of seconds) with `labels`, which
/// counts nanoseconds.
pub(crate) fn seconds_counter(name: &'static str, labels: series::Labels) -> Arc<Count> {
    series::seconds_counter(name, help(name), labels)
}

impl std::fmt::Debug for RouteMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteMetrics").field("route", &self.route).finish_non_exhaustive()
    }
}

impl RouteMetrics {
    /// The handles of `route`, served by `worker`, of `tenant` if a tenant's.
    pub(crate) fn new(route: &str, worker: &str, tenant: Option<&str>) -> Self {
        let guest = std::sync::OnceLock::new();
        if let Some(existing) = Guest::existing(worker) {
            let _ = guest.set(existing);
        }
        Self {
            route: route.to_owned(),
            worker: worker.to_owned(),
            tenant: tenant.map(str::to_owned),
            outcomes: Keyed::default(),
            failures: Keyed::default(),
            cuts: Keyed::default(),
            guest,
        }
    }

    /// The handles of requests no route matched (route and worker `-`): they are counted and
    /// timed, and never reach a guest.
    pub(crate) fn unrouted() -> Self {
        Self {
            route: "-".to_owned(),
            worker: "-".to_owned(),
            tenant: None,
            outcomes: Keyed::default(),
            failures: Keyed::default(),
            cuts: Keyed::default(),
            guest: std::sync::OnceLock::from(Guest {
                instantiate: Buckets::detached(&SECONDS),
                cpu: Buckets::detached(&SECONDS),
                memory: Buckets::detached(&BYTES),
            }),
        }
    }

    /// Records one answered request.
    pub(crate) fn request(&self, status: u16, source: &'static str, elapsed: Duration) {
        let make = || {
            let mut labels = vec![
                ("route", self.route.clone()),
                ("worker", self.worker.clone()),
                ("status", status.to_string()),
                ("source", source.to_owned()),
            ];
            labels.extend(self.tenant.iter().map(|tenant| ("tenant", tenant.clone())));
            Outcome {
                requests: counter("edgegate_requests_total", labels.clone()),
                duration: histogram("edgegate_request_duration_seconds", &SECONDS, labels),
            }
        };
        self.outcomes.with((status, source), make, |outcome| {
            outcome.requests.increment(1);
            outcome.duration.record_time(elapsed);
        });
    }

    /// Counts a failure of `worker` that is a trap or a spent limit under its label; other
    /// failures are in `edgegate_requests_total` alone.
    pub(crate) fn failure(&self, worker: &str, error: &RequestError) {
        let (name, label, key) = match &error.kind {
            ErrorKind::Exec(kind @ (ExecErrorKind::Trap | ExecErrorKind::StackOverflow)) => {
                ("edgegate_traps_total", kind.code(), "kind")
            }
            ErrorKind::Exec(ExecErrorKind::OutOfMemory) => {
                ("edgegate_limit_hits_total", "memory", "limit")
            }
            ErrorKind::Exec(ExecErrorKind::CpuBudgetExceeded) => {
                ("edgegate_limit_hits_total", "cpu", "limit")
            }
            ErrorKind::Exec(ExecErrorKind::DeadlineExceeded) => {
                ("edgegate_limit_hits_total", "deadline", "limit")
            }
            ErrorKind::Exec(ExecErrorKind::HostcallBudgetExceeded) => {
                ("edgegate_limit_hits_total", "hostcalls", "limit")
            }
            ErrorKind::Exec(ExecErrorKind::ResponseTooLarge) => {
                ("edgegate_limit_hits_total", "response_body", "limit")
            }
            ErrorKind::BodyTooLarge => ("edgegate_limit_hits_total", "request_body", "limit"),
            ErrorKind::Overloaded => ("edgegate_limit_hits_total", "concurrency", "limit"),
            _ => return,
        };
        let make = || counter(name, vec![("worker", worker.to_owned()), (key, label.to_owned())]);
        self.failures.with((name, label, worker.to_owned()), make, |count| count.increment(1));
    }

    /// Counts an answer of `worker` (`-` for an upstream's) cut short after its head was sent,
    /// for `reason`.
    pub(crate) fn cut(&self, worker: &str, reason: &str) {
        let make = || {
            let labels = vec![
                ("route", self.route.clone()),
                ("worker", worker.to_owned()),
                ("reason", reason.to_owned()),
            ];
            counter("edgegate_responses_cut_total", labels)
        };
        let key = (worker.to_owned(), reason.to_owned());
        self.cuts.with(key, make, |count| count.increment(1));
    }

    /// Records what a request's guest cost, if it got as far as an instance.
    pub(crate) fn usage(&self, usage: &Usage) {
        if usage.instantiate.is_zero() {
            return;
        }
        let guest = self.guest.get_or_init(|| Guest::of(&self.worker));
        guest.instantiate.record_time(usage.instantiate);
        guest.cpu.record_time(usage.cpu);
        guest.memory.record(usage.memory_peak);
    }
}

#[cfg(test)]
mod tests {
    use super::{METRICS, SECONDS};

    #[test]
    fn buckets_double_from_10_us_past_10_s() {
        let buckets = SECONDS.bounds();
        assert_eq!(buckets.len(), 21);
        assert_eq!(buckets[0], 10e-6);
        assert!(buckets[19] < 10.0 && buckets[20] >= 10.0, "{buckets:?}");
    }

    /// The dashboard and the rules query only metrics that exist, under their exported names.
    #[test]
    fn the_deploy_examples_query_only_metrics_edgegate_exports() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
        let mut queried = 0;
        for file in ["grafana/edgegate.json", "prometheus/edgegate-rules.yml"] {
            let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                // Recording rules (`edgegate:…`) are split at the colon; their parts are not names.
                if !word.starts_with("edgegate_") {
                    continue;
                }
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| word.strip_suffix(suffix))
                    .filter(|base| METRICS.iter().any(|(n, ..)| n == base))
                    .unwrap_or(word);
                assert!(METRICS.iter().any(|(n, ..)| *n == base), "{file}: {word} is not exported");
                queried += 1;
            }
        }
        assert!(queried > 20, "only {queried} metric references found");
    }
}
