//! What one version of the configuration serves: a [`Snapshot`] of routes compiled to their
//! [`Target`]s (a worker, a fixed answer, an upstream or a split of these), workers loaded,
//! upstream pools open, keys loaded and limits in force. [`super::build`] makes one; a
//! request takes one and keeps it to its end.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use edgegate_runtime::{Forward, Worker};
use http::Response;
use tokio::task::JoinHandle;

use super::share::Share;
use crate::config::{Loaded, ServerConfig};
use crate::error::{ErrorKind, RequestError};
use crate::forward::upstream::Upstream;
use crate::observe::metrics::{Count, CountsBy, Keyed, Level, RouteMetrics};
use crate::route::path::PathRules;
use crate::route::router::Router;
use crate::route::split::{By, Split};

/// One version of the configuration, whole: workers loaded, routes compiled, upstream pools
/// open, keys loaded, limits in force.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// 1 at start, one more for each reload that took effect.
    pub(super) generation: u64,
    /// The configuration it was built from.
    pub(super) loaded: Loaded,
    pub(super) router: Router<Target>,
    pub(super) server: ServerConfig,
    pub(super) path_rules: PathRules,
    pub(super) upstreams: HashMap<String, Arc<Upstream>>,
    /// Every loaded worker by name.
    pub(super) workers: BTreeMap<String, Worker>,
    /// The manifest each `oci://` module resolved to, by reference.
    pub(super) pulled: BTreeMap<String, crate::registry::Digest>,
    /// The workers' shares of the instance slots, by name: a reload that keeps a worker's
    /// `max_concurrency` keeps its share, and the requests holding it.
    pub(super) shares: HashMap<String, Share>,
    /// The rate-limit policies by name: a reload that keeps a policy's table keeps it, and
    /// its counts.
    pub(super) rate_limits: HashMap<String, Arc<crate::route::rate_limit::Policy>>,
    /// `[server] trusted_proxies`, for the client address rate limits count by.
    pub(super) trusted_proxies: crate::route::rate_key::TrustedProxies,
    /// `edgegate_worker_info{worker,digest}` of each of `workers`, in the same order: the
    /// series goes when the last snapshot holding it does.
    pub(super) worker_info: Vec<Arc<Level>>,
    /// The KV namespaces, shared with the snapshots before and after it while `[kv]` is
    /// unchanged.
    pub(super) kv: Arc<Kv>,
    /// The TLS listener's configuration: certificates, versions, client authorities.
    pub(super) tls: Option<Arc<rustls::ServerConfig>>,
    /// The tenants: their tokens' hashes, shares and usage.
    pub(super) tenants: Arc<super::tenants::Tenants>,
    /// JWKS refreshers and demo origins, stopped when the last request on this snapshot ends.
    pub(super) _background: Background,
}

/// The KV namespaces and their background tasks. Opened once: every snapshot shares them
/// while `[kv]` is unchanged (a reload cannot change it).
#[derive(Debug)]
pub(crate) struct Kv {
    pub(super) namespaces: BTreeMap<String, edgegate_kv::Namespace>,
    pub(super) _tasks: Background,
}

/// Tasks that live as long as the gateway.
#[derive(Debug, Default)]
pub(super) struct Background(pub(super) Vec<JoinHandle<()>>);

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// What a route leads to, and its metrics.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) action: Action,
    pub(super) metrics: Arc<RouteMetrics>,
    /// The bearer token check made before the action, if the route has one.
    pub(super) identity: Option<Arc<crate::route::identity::Identity>>,
    /// The rate-limit policies the route applies, in order, after its identity check.
    pub(super) rate_limits: Vec<crate::route::rate_limit::RouteLimit>,
    /// The tenant whose route it is: its share of the slots, and its usage.
    pub(super) tenant: Option<Arc<super::tenants::Tenant>>,
}

/// What serves a route's requests.
#[derive(Debug, Clone)]
pub(super) enum Action {
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
pub(super) struct SplitTarget {
    pub(super) action: Action,
    /// `edgegate_split_total{route,target,by}`.
    pub(super) decided: CountsBy<By>,
    /// The route's name, for the fallback counter.
    pub(super) route: String,
    /// This target's name.
    pub(super) name: String,
    /// `edgegate_split_fallbacks_total{route,target,reason}`, by reason.
    pub(super) fallbacks: Keyed<&'static str, Arc<Count>>,
}

impl SplitTarget {
    /// Counts a request that falls back to this target after the other failed with `reason`.
    pub(super) fn fell_back(&self, reason: &'static str) {
        let make = || {
            let labels = vec![
                ("route", self.route.clone()),
                ("target", self.name.clone()),
                ("reason", reason.to_owned()),
            ];
            crate::observe::metrics::counter("edgegate_split_fallbacks_total", labels)
        };
        self.fallbacks.with(reason, make, |count| count.increment(1));
    }
}

/// A route's upstream.
#[derive(Debug, Clone)]
pub(super) struct UpstreamTarget {
    pub(super) upstream: Arc<Upstream>,
    /// The server's request body limit.
    pub(super) body_limit: u64,
}

/// A route's worker, with what the route allows it.
#[derive(Debug, Clone)]
pub(super) struct WorkerTarget {
    pub(super) worker: Worker,
    /// The worker's share of the instance slots, with `max_concurrency`.
    pub(super) share: Option<Share>,
    /// The smaller of the server's and the worker's request body limits.
    pub(super) body_limit: u64,
    /// The upstreams the worker may forward to.
    pub(super) grants: Arc<[String]>,
}

impl Snapshot {
    /// Sets `edgegate_config_generation` and `edgegate_worker_info` for this snapshot, putting the
    /// versions it replaces of `previous` at 0 (their series go with the last snapshot that
    /// holds them).
    pub(super) fn publish(&self, previous: Option<&Snapshot>) {
        metrics::gauge!("edgegate_config_generation").set(self.generation as f64);
        if let Some(previous) = previous {
            for info in &previous.worker_info {
                info.set(0);
            }
        }
        for info in &self.worker_info {
            info.set(1);
        }
    }

    /// The upstream a forward names, if the worker may use it.
    pub(super) fn granted(
        &self,
        target: &WorkerTarget,
        forward: &Forward,
    ) -> Result<&Upstream, RequestError> {
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
