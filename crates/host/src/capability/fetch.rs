//! Workers' outbound requests (`fetch_start`): the allow-list, and the pools they go through.
//!
//! A worker may fetch
//!
//! * `upstream://NAME/path` from an upstream it is granted (`workers.NAME.upstreams`), through
//!   that upstream's pool, with its timeouts;
//! * `http(s)://host[:port]/path` from an origin in its `fetch` list, matched on scheme, host
//!   (case-insensitive, or a wildcard's) and port (the scheme's default when omitted), through
//!   the `[fetch]` pool for that origin's reach (crate::capability::reach): a deployed worker's
//!   fetches connect only where its deployer's grant lets them.
//!
//! Anything else is refused before a connection is made. Hop-by-hop headers and `Host` are
//! dropped from the guest's request (the pool sets `Host` from the URL); the response body is
//! read whole, at most the worker's `subrequest_body` bytes, and cut off when it stalls for
//! the pool's idle timeout. Nothing is retried.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use edgegate_runtime::{FetchError, FetchFuture, Fetcher};
use http::header;
use http::uri::{PathAndQuery, Scheme};
use http_body_util::{BodyExt, Full};

use crate::capability::origin::Origin;
use crate::capability::reach::{Guard, Reach};
use crate::error::error_chain;
use crate::forward::client::{self, ClientError, SendFailure};
use crate::forward::headers::strip_hop_by_hop;
use crate::forward::pool::{Pool, PoolSettings};
use crate::forward::upstream::Upstream;
use crate::observe::metrics::{CountsBy, LabelValue};

/// Sends `request` through `pool` and reads the whole response, at most `max_body` bytes.
/// `name` (the upstream's, or the origin) is for error messages.
async fn send(
    pool: Pool,
    name: String,
    mut request: http::Request<Bytes>,
    max_body: u64,
) -> Result<http::Response<Bytes>, FetchError> {
    strip_hop_by_hop(request.headers_mut());
    request.headers_mut().remove(header::HOST);
    request.headers_mut().remove(header::CONTENT_LENGTH);
    let request = request.map(Full::new);
    let name = &name;
    let response = match tokio::time::timeout(pool.first_byte_timeout, pool.client.request(request))
        .await
    {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => {
            let detail = format!("{name}: {}", error_chain(&e));
            if client::refused_by_guard(&e) {
                return Err(FetchError::NotAllowed(detail));
            }
            return Err(match client::classify(&e) {
                SendFailure::Timeout => FetchError::Timeout(detail),
                SendFailure::Connect | SendFailure::BadResponse => FetchError::Unavailable(detail),
            });
        }
        Err(_) => {
            return Err(FetchError::Timeout(format!(
                "{name}: no response head after {:?}",
                pool.first_byte_timeout
            )));
        }
    };
    let (mut parts, mut body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let mut collected = BytesMut::new();
    loop {
        let frame = match tokio::time::timeout(pool.idle_timeout, body.frame()).await {
            Err(_) => {
                return Err(FetchError::Timeout(format!(
                    "{name}: the body stalled for {:?}",
                    pool.idle_timeout
                )));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(FetchError::Unavailable(format!("{name}: body: {}", error_chain(&e))));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if (collected.len() + data.len()) as u64 > max_body {
                return Err(FetchError::TooLarge(max_body));
            }
            collected.extend_from_slice(&data);
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(http::Response::from_parts(parts, collected.freeze()))
}

/// One worker's fetches: its granted upstreams, its allowed origins (each with where it may
/// connect) and the shared pools.
#[derive(Debug)]
pub(crate) struct WorkerFetcher {
    pub(crate) upstreams: HashMap<String, Arc<Upstream>>,
    pub(crate) origins: Vec<(Origin, Reach)>,
    /// The `[fetch]` pools.
    pub(crate) pools: Arc<FetchPools>,
    /// `edgegate_fetches_total{worker,outcome}`, by [`Outcome`].
    pub(crate) counts: Arc<CountsBy<Outcome>>,
}

/// The `[fetch]` pools, one per [`Reach`]: the operator's workers' (anywhere), and, when
/// deployed workers fetch, one that keeps away from this host and one for public addresses
/// only. Connections are never shared between reaches: a pooled connection a worker that may
/// reach anywhere opened is not one a tenant's worker gets.
#[derive(Debug)]
pub(crate) struct FetchPools {
    anywhere: Pool,
    guarded: Option<[(Guard, Pool); 2]>,
}

impl FetchPools {
    /// The pools of `settings`; the guarded two only if `guarded` (some deployed worker
    /// fetches), kept from the admin listener at `admin`.
    pub(crate) fn new(
        settings: &PoolSettings<'_>,
        guarded: bool,
        admin: std::net::SocketAddr,
    ) -> Result<Self, ClientError> {
        let anywhere = Pool::new(settings)?;
        let guarded = if guarded {
            let pool = |reach| -> Result<(Guard, Pool), ClientError> {
                let guard = Guard { reach, admin };
                Ok((guard, Pool::new(&PoolSettings { guard, ..*settings })?))
            };
            Some([pool(Reach::Away)?, pool(Reach::Public)?])
        } else {
            None
        };
        Ok(Self { anywhere, guarded })
    }

    /// The pool for `reach`, and the guard its connections pass.
    fn get(&self, reach: Reach) -> (Guard, &Pool) {
        let guarded = self.guarded.iter().flatten().find(|(guard, _)| guard.reach == reach);
        match guarded {
            Some((guard, pool)) => (*guard, pool),
            // Only the operator's workers reach a fetcher without guarded pools.
            None => (Guard::none(), &self.anywhere),
        }
    }
}

/// How a fetch ended, for `edgegate_fetches_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Denied,
    Invalid,
    Unavailable,
    Timeout,
    TooLarge,
    /// Past the worker's `subrequests`: never started.
    Limit,
}

impl LabelValue for Outcome {
    const LABEL: &'static str = "outcome";
    const ALL: &'static [Self] = &[
        Self::Ok,
        Self::Denied,
        Self::Invalid,
        Self::Unavailable,
        Self::Timeout,
        Self::TooLarge,
        Self::Limit,
    ];

    fn value(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Denied => "denied",
            Self::Invalid => "invalid",
            Self::Unavailable => "unavailable",
            Self::Timeout => "timeout",
            Self::TooLarge => "too_large",
            Self::Limit => "limit",
        }
    }
}

impl Outcome {
    fn of(result: Result<&http::Response<Bytes>, &FetchError>) -> Self {
        match result {
            Ok(_) => Self::Ok,
            Err(FetchError::NotAllowed(_)) => Self::Denied,
            Err(FetchError::Invalid(_)) => Self::Invalid,
            Err(FetchError::Unavailable(_)) => Self::Unavailable,
            Err(FetchError::Timeout(_)) => Self::Timeout,
            Err(FetchError::TooLarge(_)) => Self::TooLarge,
        }
    }

    /// The counters of worker `worker`, one per outcome.
    pub(crate) fn counters(worker: &str) -> Arc<CountsBy<Self>> {
        let labels = vec![("worker", worker.to_owned())];
        Arc::new(CountsBy::new("edgegate_fetches_total", &labels))
    }
}

impl Fetcher for WorkerFetcher {
    fn start(
        &self,
        request: http::Request<Bytes>,
        max_body: u64,
    ) -> Result<FetchFuture, FetchError> {
        let counts = self.counts.clone();
        match self.route(request, max_body) {
            Ok(future) => Ok(Box::pin(async move {
                let result = future.await;
                counts.increment(Outcome::of(result.as_ref()));
                result
            })),
            Err(error) => {
                counts.increment(Outcome::of(Err(&error)));
                Err(error)
            }
        }
    }

    fn over_cap(&self) {
        self.counts.increment(Outcome::Limit);
    }
}

impl WorkerFetcher {
    /// Checks `request` against the grants and starts it through its pool.
    fn route(
        &self,
        mut request: http::Request<Bytes>,
        max_body: u64,
    ) -> Result<FetchFuture, FetchError> {
        let uri = request.uri().clone();
        if uri.scheme_str() == Some("upstream") {
            let name = uri.host().unwrap_or("");
            let upstream = self.upstreams.get(name).ok_or_else(|| {
                FetchError::NotAllowed(format!("upstream `{name}` is not granted"))
            })?;
            let path = uri.path_and_query().cloned().unwrap_or(PathAndQuery::from_static("/"));
            *request.uri_mut() = upstream.uri(path)?;
            return Ok(Box::pin(send(
                upstream.pool().clone(),
                upstream.name().to_owned(),
                request,
                max_body,
            )));
        }
        let origin = Origin::of(&uri)
            .ok_or_else(|| FetchError::Invalid(format!("`{uri}`: not http, https or upstream")))?;
        let host = origin.exact_host().unwrap_or_default().to_owned();
        let name = format!("{host}:{}", origin.port);
        // The widest reach among the entries that allow it: an origin granted by name as
        // well as by a wildcard reaches what its name does.
        let allowing = self.origins.iter().filter(|(allowed, _)| origin.within(allowed));
        let Some(reach) = allowing.map(|(_, reach)| *reach).min() else {
            let scheme = if origin.https { Scheme::HTTPS } else { Scheme::HTTP };
            return Err(FetchError::NotAllowed(format!(
                "{scheme}://{name} is not in the worker's fetch list"
            )));
        };
        let (guard, pool) = self.pools.get(reach);
        // An address written in the URL is judged here; a name, by the pool as it resolves.
        if let Ok(ip) = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>()
            && !guard.allows(std::net::SocketAddr::new(ip, origin.port))
        {
            return Err(FetchError::NotAllowed(format!(
                "{name}: an address this worker may not reach"
            )));
        }
        Ok(Box::pin(send(pool.clone(), name, request, max_body)))
    }
}
