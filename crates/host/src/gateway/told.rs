//! What a request did, told once its answer has been sent: its access line, its guest's
//! histograms, its tenant's usage, and the count of an answer cut short. An answer the gateway
//! holds whole is told as soon as its head is ready ([`tell`]); a streamed one (an upstream's,
//! or a component's past its buffer) when its body ends, whole or cut, or is dropped by a
//! client that went away ([`Pending`], held by the body), so that its bytes, the CPU its guest
//! spent streaming and why it was cut are in the line and the counters.
//!
//! ```text
//!  head ready ─▶ request counter and latency (to the head)
//!     whole: ─▶ tell now
//!     streamed: Pending in the body ─▶ body ends / fails / dropped ─▶ tell then
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use edgegate_runtime::{ExecErrorKind, Progress, RequestId, Usage};

use super::tenants::Tenant;
use crate::error::RequestError;
use crate::listen::conn::ConnInfo;
use crate::observe::access::{self, Access, Logged};
use crate::observe::metrics::RouteMetrics;
use crate::observe::usage::Used;

/// Tells what `logged`'s request did: its access line (`access`), its guest's histograms, its
/// tenant's usage, and, if its answer was cut, the cut counter.
pub(super) fn tell(access: &Access<'_>, metrics: &RouteMetrics, tenant: Option<&Tenant>) {
    let logged = access.logged;
    metrics.usage(&logged.usage);
    if let Some(cut) = logged.cut {
        metrics.cut(logged.worker.unwrap_or("-"), cut);
    }
    if let Some(tenant) = tenant {
        tenant.usage.record(&Used {
            usage: logged.usage,
            request_bytes: logged.request_bytes,
            response_bytes: logged.response_bytes,
        });
    }
    access::log(access);
}

/// A streamed answer's request, owned, to be told when its body ends.
#[derive(Debug)]
pub(crate) struct Pending {
    id: RequestId,
    trace_id: Option<String>,
    method: http::Method,
    path: String,
    conn: ConnInfo,
    status: u16,
    started: Instant,
    route: Option<String>,
    target: Option<String>,
    worker: Option<String>,
    digest: Option<String>,
    upstream: Option<String>,
    upstream_time: Option<Duration>,
    usage: Usage,
    request_bytes: u64,
    metrics: Arc<RouteMetrics>,
    tenant: Option<Arc<Tenant>>,
}

/// How a streamed body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Whole.
    Whole,
    /// Cut by the gateway or the upstream: an error frame (the guest's cut says why).
    Failed,
    /// Dropped before its end: the client went away.
    Dropped,
}

/// The parts of a request that its [`Pending`] keeps.
pub(super) struct Head<'a> {
    pub(super) id: RequestId,
    pub(super) trace_id: Option<&'a str>,
    pub(super) method: &'a http::Method,
    pub(super) path: &'a str,
    pub(super) conn: ConnInfo,
    pub(super) status: u16,
    pub(super) started: Instant,
}

impl Pending {
    /// `logged`'s request, with its head, owned.
    pub(super) fn new(
        head: Head<'_>,
        logged: &Logged<'_>,
        metrics: Arc<RouteMetrics>,
        tenant: Option<Arc<Tenant>>,
    ) -> Self {
        let own = |s: Option<&str>| s.map(str::to_owned);
        Self {
            id: head.id,
            trace_id: own(head.trace_id),
            method: head.method.clone(),
            path: head.path.to_owned(),
            conn: head.conn,
            status: head.status,
            started: head.started,
            route: own(logged.route),
            target: own(logged.target),
            worker: own(logged.worker),
            digest: own(logged.digest),
            upstream: own(logged.upstream),
            upstream_time: logged.upstream_time,
            usage: logged.usage,
            request_bytes: logged.request_bytes,
            metrics,
            tenant,
        }
    }

    /// Tells the request, whose body ended so after `sent` bytes; `progress`: its streaming
    /// guest's, which says what it used in all and why its answer was cut.
    pub(crate) fn tell(self, sent: u64, ended: Ended, progress: Option<&Progress>) {
        // A HEAD's body is never sent: hyper drops it, which ends it as it should.
        let ended = match ended {
            Ended::Dropped if self.method == http::Method::HEAD => Ended::Whole,
            ended => ended,
        };
        let usage = match progress {
            Some(progress) => Usage { load: self.usage.load, ..progress.usage() },
            None => self.usage,
        };
        let cut = match (ended, progress) {
            (Ended::Whole, _) => None,
            (Ended::Failed, Some(progress)) => {
                let kind = progress.cut().unwrap_or(ExecErrorKind::WorkerFailed);
                Some(kind.code())
            }
            (Ended::Failed, None) => Some("upstream_body"),
            (Ended::Dropped, _) => Some("client_closed"),
        };
        let logged = Logged {
            route: self.route.as_deref(),
            worker: self.worker.as_deref(),
            digest: self.digest.as_deref(),
            upstream: self.upstream.as_deref(),
            metrics: Some(&self.metrics),
            usage,
            upstream_time: self.upstream_time,
            target: self.target.as_deref(),
            tenant: self.tenant.as_ref().map(|t| t.name.as_str()),
            request_bytes: self.request_bytes,
            response_bytes: sent,
            cut,
        };
        let error: Option<&RequestError> = None;
        let access = Access {
            id: self.id,
            trace_id: self.trace_id.as_deref(),
            method: &self.method,
            path: &self.path,
            logged: &logged,
            conn: self.conn,
            status: self.status,
            elapsed: self.started.elapsed(),
            error,
        };
        tell(&access, &self.metrics, self.tenant.as_deref());
    }
}
