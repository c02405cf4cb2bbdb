//! Upstreams: where a worker's forward directive sends the request, and how it is proxied.
//!
//! ```text
//!  client request (body already read) ─▶ drop hop-by-hop headers (and those `Connection` names)
//!     ─▶ the worker's header edits ─▶ drop hop-by-hop names again (a worker cannot set them)
//!     ─▶ X-Forwarded-For / -Proto / -Host (replaced, or appended to when trusted)
//!     ─▶ Host: the upstream's (or the client's, with preserve_host)
//!     ─▶ pool ─(connect_timeout)─▶ upstream ─(first_byte_timeout)─▶ response head
//!  client ◀─ hop-by-hop headers dropped ◀─ body streamed, cut if idle past idle_timeout
//! ```
//!
//! Failures are the upstream's: 502 when it cannot be reached or answers something that is not
//! HTTP, 504 when it is too slow to connect or to answer. Nothing is retried that may have
//! reached it (see [`crate::forward::client`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use edgegate_runtime::{FetchError, Forward, HeaderEdit};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, Scheme};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use crate::config::UpstreamConfig;
use crate::error::{ErrorKind, RequestError, error_chain};
use crate::forward::client::{self, ClientError, SendFailure};
use crate::forward::headers::{HOP_BY_HOP, strip_hop_by_hop};
use crate::forward::pool::{Pool, PoolSettings};
use crate::listen::conn::ConnInfo;
#[cfg(test)]
use crate::listen::conn::TlsInfo;
use crate::observe::metrics::{Buckets, Count, Keyed, Level, Raised, SECONDS};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Why an upstream could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// Its URL names no host.
    #[error("`{0}` names no host")]
    NoHost(String),
    /// Its pool could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// A configured upstream and its connection pool.
pub(crate) struct Upstream {
    name: Arc<str>,
    scheme: Scheme,
    authority: Authority,
    pool: Pool,
    preserve_host: bool,
    duration: Arc<Buckets>,
    in_flight: Arc<Level>,
    /// `edgegate_upstream_errors_total{upstream,kind}`, by kind.
    errors: Keyed<&'static str, Arc<Count>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("url", &format_args!("{}://{}", self.scheme, self.authority))
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// An upstream at `url`, with a pool set up from `config`.
    pub(crate) fn new(
        name: &str,
        url: &http::Uri,
        config: &UpstreamConfig,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Self, UpstreamError> {
        let pool = Pool::new(&PoolSettings::upstream(name, config, ca_file))?;
        Ok(Self {
            name: name.into(),
            scheme: url.scheme().cloned().unwrap_or(Scheme::HTTP),
            authority: url
                .authority()
                .cloned()
                .ok_or_else(|| UpstreamError::NoHost(url.to_string()))?,
            pool,
            preserve_host: config.preserve_host,
            duration: crate::observe::metrics::histogram(
                "edgegate_upstream_duration_seconds",
                &SECONDS,
                vec![("upstream", name.to_owned())],
            ),
            in_flight: crate::observe::metrics::gauge(
                "edgegate_upstream_in_flight",
                vec![("upstream", name.to_owned())],
            ),
            errors: Keyed::default(),
        })
    }

    /// The upstream's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `path` at this upstream.
    pub(crate) fn uri(&self, path: http::uri::PathAndQuery) -> Result<http::Uri, FetchError> {
        http::Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()
            .map_err(|e| FetchError::Invalid(format!("URL at {}: {e}", self.name)))
    }

    /// This upstream's pool and timeouts, which a worker's `upstream://` fetch uses too.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Proxies `forward`'s request here and returns the response head, its body streaming.
    pub(crate) async fn send(
        &self,
        forward: Forward,
        conn: ConnInfo,
        trust_forwarded: bool,
    ) -> Result<http::Response<UpstreamBody>, RequestError> {
        let request = self.request(forward, conn, trust_forwarded)?;
        let started = Instant::now();
        let waiting = Raised::new(&self.in_flight);
        let sent =
            tokio::time::timeout(self.pool.first_byte_timeout, self.pool.client.request(request))
                .await;
        drop(waiting);
        let failed = |kind: ErrorKind, detail: String| {
            let label = match kind {
                ErrorKind::UpstreamConnect => "connect",
                ErrorKind::UpstreamTimeout => "timeout",
                _ => "bad_response",
            };
            let make = || {
                let labels = vec![("upstream", self.name.to_string()), ("kind", label.to_owned())];
                crate::observe::metrics::counter("edgegate_upstream_errors_total", labels)
            };
            self.errors.with(label, make, |count| count.increment(1));
            Err(RequestError::new(kind, format!("{}: {detail}", self.name)))
        };
        let response = match sent {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                let kind = match client::classify(&e) {
                    SendFailure::Connect => ErrorKind::UpstreamConnect,
                    SendFailure::Timeout => ErrorKind::UpstreamTimeout,
                    SendFailure::BadResponse => ErrorKind::UpstreamBadResponse,
                };
                return failed(kind, error_chain(&e));
            }
            Err(_) => {
                let after = format!("no response head after {:?}", self.pool.first_byte_timeout);
                return failed(ErrorKind::UpstreamTimeout, after);
            }
        };
        self.duration.record_time(started.elapsed());
        let (mut parts, body) = response.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        let body = UpstreamBody {
            inner: body,
            idle: tokio::time::sleep(self.pool.idle_timeout),
            timeout: self.pool.idle_timeout,
            upstream: self.name.clone(),
        };
        Ok(http::Response::from_parts(parts, body))
    }

    /// The request as the upstream gets it.
    fn request(
        &self,
        forward: Forward,
        conn: ConnInfo,
        trust_forwarded: bool,
    ) -> Result<http::Request<Full<Bytes>>, RequestError> {
        let request = forward.request;
        let mut headers = request.headers;
        let client_host =
            request.uri.authority().map(|a| a.as_str().to_owned()).or_else(|| {
                headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(String::from)
            });
        strip_hop_by_hop(&mut headers);
        for edit in forward.edits {
            match edit {
                HeaderEdit::Set(name, value) => {
                    headers.insert(name, value);
                }
                HeaderEdit::Append(name, value) => {
                    headers.append(name, value);
                }
                HeaderEdit::Remove(name) => {
                    headers.remove(name);
                }
            }
        }
        for name in &HOP_BY_HOP {
            headers.remove(name);
        }
        set_forwarded(&mut headers, conn, client_host.as_deref(), trust_forwarded);
        crate::observe::trace::inject(&mut headers);
        headers.remove(header::CONTENT_LENGTH);
        headers.remove(header::HOST);
        if self.preserve_host
            && let Some(host) = client_host.as_deref().and_then(|h| HeaderValue::from_str(h).ok())
        {
            headers.insert(header::HOST, host);
        }
        let path = request.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let uri = http::Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()
            .map_err(|e| {
                RequestError::new(ErrorKind::BadRequest, format!("request target: {e}"))
            })?;
        let mut out = http::Request::new(Full::new(request.body));
        *out.method_mut() = request.method;
        *out.uri_mut() = uri;
        *out.headers_mut() = headers;
        Ok(out)
    }
}

/// Headers that say where a request came from, which only a proxy may set: frameworks read
/// them (Rack `X-Forwarded-Ssl` and `-Scheme`, Spring `-Port` and `-Prefix`, `request-ip` the
/// client-IP ones), so a client's own must never reach an upstream unless it is trusted.
/// Besides these, every `X-Forwarded-*` header is removed.
const CLIENT_IP: [&str; 6] = [
    "x-real-ip",
    "true-client-ip",
    "x-client-ip",
    "x-cluster-client-ip",
    "cf-connecting-ip",
    "fastly-client-ip",
];

/// Sets `X-Forwarded-For`, `-Proto` and `-Host`. Untrusted (the default), everything the
/// client sent that says where the request came from (`Forwarded`, every `X-Forwarded-*`,
/// [`CLIENT_IP`]) is removed, and those three are set to what this gateway saw; the port is
/// in `X-Forwarded-Host`.
fn set_forwarded(headers: &mut HeaderMap, conn: ConnInfo, host: Option<&str>, trusted: bool) {
    let peer = conn.peer.ip().to_string();
    let proto = HeaderValue::from_static(if conn.tls.is_some() { "https" } else { "http" });
    if trusted {
        let chain = match headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
            Some(earlier) => format!("{earlier}, {peer}"),
            None => peer,
        };
        if let Ok(chain) = HeaderValue::from_str(&chain) {
            headers.insert(X_FORWARDED_FOR, chain);
        }
        if !headers.contains_key(&X_FORWARDED_PROTO) {
            headers.insert(X_FORWARDED_PROTO, proto);
        }
        if !headers.contains_key(&X_FORWARDED_HOST)
            && let Some(host) = host.and_then(|h| HeaderValue::from_str(h).ok())
        {
            headers.insert(X_FORWARDED_HOST, host);
        }
        return;
    }
    headers.remove(header::FORWARDED);
    for name in CLIENT_IP {
        headers.remove(name);
    }
    let forwarded: Vec<HeaderName> =
        headers.keys().filter(|name| name.as_str().starts_with("x-forwarded-")).cloned().collect();
    for name in forwarded {
        headers.remove(name);
    }
    if let Ok(peer) = HeaderValue::from_str(&peer) {
        headers.insert(X_FORWARDED_FOR, peer);
    }
    headers.insert(X_FORWARDED_PROTO, proto);
    if let Some(host) = host.and_then(|h| HeaderValue::from_str(h).ok()) {
        headers.insert(X_FORWARDED_HOST, host);
    }
}

pin_project_lite::pin_project! {
    /// An upstream's response body, streamed to the client, cut off when no data arrives for
    /// the upstream's `idle_timeout`.
    pub struct UpstreamBody {
        #[pin]
        inner: Incoming,
        #[pin]
        idle: tokio::time::Sleep,
        timeout: Duration,
        upstream: Arc<str>,
    }
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody").field("upstream", &self.upstream).finish_non_exhaustive()
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = tokio::time::Instant::now() + *this.timeout;
                this.idle.as_mut().reset(next);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.idle.poll(cx) {
                Poll::Ready(()) => {
                    tracing::warn!(upstream = %this.upstream, timeout = ?this.timeout, "response body idle: cut off");
                    Poll::Ready(Some(Err("upstream response body idle".into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tests::headers::header_map as headers;

    #[test]
    fn hop_by_hop_headers_and_the_ones_connection_names_are_dropped() {
        let mut h = headers(&[
            ("connection", "keep-alive, x-secret"),
            ("connection", "x-other"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic x"),
            ("x-secret", "1"),
            ("x-other", "2"),
            ("x-kept", "3"),
        ]);
        strip_hop_by_hop(&mut h);
        let left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["x-kept"]);
    }

    fn conn(tls: bool) -> ConnInfo {
        let tls = tls.then_some(TlsInfo { version: "TLSv1.3", alpn: "h2" });
        ConnInfo { peer: "203.0.113.7:5555".parse().unwrap(), tls }
    }

    #[test]
    fn untrusted_forwarding_headers_are_replaced() {
        let family = [
            ("x-forwarded-port", "443"),
            ("x-forwarded-ssl", "on"),
            ("x-forwarded-scheme", "https"),
            ("x-forwarded-prefix", "/admin"),
            ("x-forwarded-server", "evil"),
            ("x-forwarded-uri", "/admin"),
            ("x-real-ip", "10.0.0.1"),
            ("true-client-ip", "10.0.0.1"),
            ("x-client-ip", "10.0.0.1"),
            ("x-cluster-client-ip", "10.0.0.1"),
            ("cf-connecting-ip", "10.0.0.1"),
            ("fastly-client-ip", "10.0.0.1"),
        ];
        let mut h = headers(&[
            ("x-forwarded-for", "10.0.0.1"),
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=10.0.0.1"),
            ("x-kept", "1"),
        ]);
        for (name, value) in family {
            h.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
        set_forwarded(&mut h, conn(false), Some("api.example:8080"), false);
        assert_eq!(h["x-forwarded-for"], "203.0.113.7");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "api.example:8080");
        assert!(h.get("forwarded").is_none());
        for (name, _) in family {
            assert!(h.get(name).is_none(), "{name} reached the upstream");
        }
        assert_eq!(h["x-kept"], "1");
        // Trusted, they are the proxy's in front, and kept.
        let mut h = headers(&family);
        set_forwarded(&mut h, conn(false), None, true);
        for (name, value) in family {
            assert_eq!(h[name], value);
        }
    }

    #[test]
    fn trusted_forwarding_headers_are_extended() {
        let mut h = headers(&[("x-forwarded-for", "198.51.100.1"), ("x-forwarded-proto", "https")]);
        set_forwarded(&mut h, conn(false), Some("api.example"), true);
        assert_eq!(h["x-forwarded-for"], "198.51.100.1, 203.0.113.7");
        assert_eq!(h["x-forwarded-proto"], "https", "kept");
        assert_eq!(h["x-forwarded-host"], "api.example", "added");
        let mut h = HeaderMap::new();
        set_forwarded(&mut h, conn(true), None, true);
        assert_eq!(
            (&h["x-forwarded-for"], &h["x-forwarded-proto"]),
            (
                &"203.0.113.7".parse::<HeaderValue>().unwrap(),
                &"https".parse::<HeaderValue>().unwrap()
            )
        );
    }
}
