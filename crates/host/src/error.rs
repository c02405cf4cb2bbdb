//! The request path's one error type. Its kind decides everything about a failure: the status,
//! the error code in the body and the metric label, the log level, and whether a retry is
//! safe to suggest.
//!
//! Every code with its status and source is in the table of `docs/limits.md` ("Status codes
//! at a glance"), which a test here checks against [`ErrorKind`].
//!
//! The body is always short JSON, `{"error":"<code>","request_id":"<id>"}`; the detail (a trap's
//! backtrace, the guest's message) goes to the log only.

use bytes::Bytes;
use edgegate_runtime::{ExecError, ExecErrorKind, RequestId};
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::Full;

/// Who caused a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The client sent something the gateway will not serve.
    Client,
    /// The worker misbehaved or failed.
    Worker,
    /// An upstream failed or was too slow.
    Upstream,
    /// The gateway itself.
    Host,
}

impl Source {
    /// The label in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Worker => "worker",
            Self::Upstream => "upstream",
            Self::Host => "host",
        }
    }
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// No route matches the host and path.
    NoRoute,
    /// Routes match the path, but not the method.
    MethodNotAllowed(Vec<Method>),
    /// The body is larger than the route's limit.
    BodyTooLarge,
    /// The body did not arrive within `body_read_timeout`.
    BodyTimeout,
    /// The body could not be read (malformed framing, connection lost).
    BadRequest,
    /// More headers than `max_headers` (HTTP/2; hyper answers HTTP/1.1 itself).
    TooManyHeaders,
    /// No `Host` where HTTP/1.1 needs one, more than one, or one that is not `host[:port]`.
    InvalidHost,
    /// A path that climbs above the root, or has an escape that is malformed or refused.
    InvalidPath,
    /// The worker failed, or the runtime could not run it.
    Exec(ExecErrorKind),
    /// The worker forwarded to an upstream that is not configured.
    UnknownUpstream,
    /// The worker forwarded to an upstream its configuration does not grant it.
    UpstreamNotGranted,
    /// The upstream could not be reached (refused, unreachable, TLS failed).
    UpstreamConnect,
    /// The upstream's answer was not HTTP, or the connection broke before the response head.
    UpstreamBadResponse,
    /// The upstream was too slow to accept the connection or to answer.
    UpstreamTimeout,
    /// The concurrency limit was reached and the wait for a slot timed out.
    Overloaded,
    /// The route's `identity` needs a bearer token, and the request has none.
    MissingToken,
    /// The route's `identity` refused the bearer token (the log says why).
    InvalidToken,
    /// The route's `identity` cannot check tokens now: its keys come from a JWKS URL that has
    /// been down past its staleness.
    KeysUnavailable,
    /// A rate-limit policy of the route refused the request: its key made more requests than
    /// the policy allows.
    RateLimited,
    /// A shared rate-limit policy with `on_error = "fail_closed"` could not decide: its Redis
    /// failed or was too slow.
    RateLimitUnavailable,
}

impl ErrorKind {
    /// Who caused it.
    pub fn source(&self) -> Source {
        match self {
            Self::NoRoute
            | Self::MethodNotAllowed(_)
            | Self::BodyTooLarge
            | Self::BodyTimeout
            | Self::BadRequest
            | Self::TooManyHeaders
            | Self::InvalidHost
            | Self::InvalidPath
            | Self::MissingToken
            | Self::InvalidToken
            | Self::RateLimited => Source::Client,
            Self::Exec(kind) if kind.is_host() => Source::Host,
            Self::Exec(_) | Self::UnknownUpstream | Self::UpstreamNotGranted => Source::Worker,
            Self::UpstreamConnect | Self::UpstreamBadResponse | Self::UpstreamTimeout => {
                Source::Upstream
            }
            Self::Overloaded | Self::KeysUnavailable | Self::RateLimitUnavailable => Source::Host,
        }
    }

    /// The response status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoRoute => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::BadRequest | Self::InvalidHost | Self::InvalidPath => StatusCode::BAD_REQUEST,
            Self::TooManyHeaders => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::UnknownUpstream | Self::UpstreamNotGranted => StatusCode::INTERNAL_SERVER_ERROR,
            Self::UpstreamConnect | Self::UpstreamBadResponse => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Self::Overloaded | Self::KeysUnavailable | Self::RateLimitUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::MissingToken | Self::InvalidToken => StatusCode::UNAUTHORIZED,
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            // Every kind by name: a new one does not compile until it has its status.
            Self::Exec(kind) => match kind {
                ExecErrorKind::CpuBudgetExceeded
                | ExecErrorKind::HostcallBudgetExceeded
                | ExecErrorKind::WorkerUnavailable
                | ExecErrorKind::Capacity => StatusCode::SERVICE_UNAVAILABLE,
                ExecErrorKind::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
                ExecErrorKind::Trap
                | ExecErrorKind::StackOverflow
                | ExecErrorKind::OutOfMemory
                | ExecErrorKind::AbiViolation
                | ExecErrorKind::InvalidResponse
                | ExecErrorKind::ResponseTooLarge
                | ExecErrorKind::WorkerFailed
                | ExecErrorKind::Unloadable
                | ExecErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    /// The stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoRoute => "no_route",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::BodyTooLarge => "body_too_large",
            Self::BodyTimeout => "body_timeout",
            Self::BadRequest => "bad_request",
            Self::TooManyHeaders => "too_many_headers",
            Self::InvalidHost => "invalid_host",
            Self::InvalidPath => "invalid_path",
            Self::UnknownUpstream => "unknown_upstream",
            Self::UpstreamNotGranted => "upstream_not_granted",
            Self::UpstreamConnect => "upstream_connect_failed",
            Self::UpstreamBadResponse => "upstream_bad_response",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::Overloaded => "overloaded",
            Self::MissingToken => "missing_token",
            Self::InvalidToken => "invalid_token",
            Self::KeysUnavailable => "keys_unavailable",
            Self::RateLimited => "rate_limited",
            Self::RateLimitUnavailable => "rate_limit_unavailable",
            Self::Exec(kind) => kind.code(),
        }
    }

    /// Seconds after which a retry may succeed, for `Retry-After`: only when the gateway was
    /// too busy, not when the request itself was at fault.
    pub fn retry_after(&self) -> Option<u32> {
        matches!(
            self,
            Self::Overloaded
                | Self::KeysUnavailable
                | Self::RateLimitUnavailable
                | Self::Exec(ExecErrorKind::Capacity)
        )
        .then_some(1)
    }
}

/// A failed request: its kind and, for the log, what happened.
#[derive(Debug)]
pub struct RequestError {
    /// The kind.
    pub kind: ErrorKind,
    /// Detail for the log only.
    pub detail: String,
    /// Headers the answer carries besides those its kind implies (a rate limit's); boxed, as
    /// most errors have none and a `Result` carrying one stays small.
    pub headers: Option<Box<http::HeaderMap>>,
}

impl RequestError {
    /// An error of `kind` with a detail for the log.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self { kind, detail: detail.into(), headers: None }
    }

    /// The client's response.
    pub fn response(&self, id: RequestId) -> http::Response<Full<Bytes>> {
        let body = format!(r#"{{"error":"{}","request_id":"{id}"}}"#, self.kind.code());
        let mut response = http::Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = self.kind.status();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(seconds) = self.kind.retry_after() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        // RFC 6750 §3: no error code when no credentials were sent.
        let challenge = match self.kind {
            ErrorKind::MissingToken => Some("Bearer"),
            ErrorKind::InvalidToken => Some("Bearer error=\"invalid_token\""),
            _ => None,
        };
        if let Some(challenge) = challenge {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        }
        for (name, value) in self.headers.iter().flat_map(|extra| extra.iter()) {
            headers.insert(name, value.clone());
        }
        if let ErrorKind::MethodNotAllowed(methods) = &self.kind {
            let allow = methods.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
            if let Ok(allow) = HeaderValue::from_str(&allow) {
                headers.insert(header::ALLOW, allow);
            }
        }
        response
    }
}

/// An error and its causes, `: `-separated, for logs and configuration messages.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl From<ExecError> for RequestError {
    fn from(e: ExecError) -> Self {
        Self::new(ErrorKind::Exec(e.kind()), e.detail())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind once. A new kind needs an arm in `position`, and then this fails until it is
    /// listed too.
    fn every_kind() -> Vec<ErrorKind> {
        use ErrorKind::*;
        let mut kinds = vec![
            NoRoute,
            MethodNotAllowed(Vec::new()),
            BodyTooLarge,
            BodyTimeout,
            BadRequest,
            TooManyHeaders,
            InvalidHost,
            InvalidPath,
            UnknownUpstream,
            UpstreamNotGranted,
            UpstreamConnect,
            UpstreamBadResponse,
            UpstreamTimeout,
            Overloaded,
            MissingToken,
            InvalidToken,
            KeysUnavailable,
            RateLimited,
            RateLimitUnavailable,
        ];
        kinds.extend(ExecErrorKind::ALL.map(Exec));
        let position = |kind: &ErrorKind| match kind {
            NoRoute => 0,
            MethodNotAllowed(_) => 1,
            BodyTooLarge => 2,
            BodyTimeout => 3,
            BadRequest => 4,
            TooManyHeaders => 5,
            InvalidHost => 6,
            InvalidPath => 7,
            UnknownUpstream => 8,
            UpstreamNotGranted => 9,
            UpstreamConnect => 10,
            UpstreamBadResponse => 11,
            UpstreamTimeout => 12,
            Overloaded => 13,
            MissingToken => 14,
            InvalidToken => 15,
            KeysUnavailable => 16,
            RateLimited => 17,
            RateLimitUnavailable => 18,
            Exec(_) => 19,
        };
        let mut seen: Vec<usize> = kinds.iter().map(position).collect();
        seen.dedup();
        assert_eq!(seen, (0..=19).collect::<Vec<_>>(), "every kind, in order");
        kinds
    }

    /// The table users read (docs/limits.md) is the table the code has, both ways.
    #[test]
    fn every_kind_matches_the_status_table_in_the_docs() {
        let doc = include_str!("../../../docs/limits.md");
        let table = doc.split("## Status codes at a glance").nth(1).expect("the section");
        let rows: Vec<(String, u16, String)> = table
            .lines()
            .filter_map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
                Some((code.to_owned(), cells.get(2)?.parse().ok()?, cells.get(3)?.to_string()))
            })
            .collect();
        let kinds = every_kind();
        for kind in &kinds {
            let row = rows.iter().find(|(code, ..)| code == kind.code());
            let (_, status, source) = row.unwrap_or_else(|| panic!("{kind:?}: no row"));
            assert_eq!(*status, kind.status().as_u16(), "{kind:?}");
            assert_eq!(source, kind.source().as_str(), "{kind:?}");
        }
        for (code, ..) in &rows {
            assert!(kinds.iter().any(|k| k.code() == code), "`{code}` is in the docs only");
        }
    }

    #[test]
    fn the_design_table_holds() {
        let status = |k: ErrorKind| k.status().as_u16();
        assert_eq!(status(ErrorKind::Exec(ExecErrorKind::Trap)), 500);
        assert_eq!(status(ErrorKind::Exec(ExecErrorKind::OutOfMemory)), 500);
        assert_eq!(status(ErrorKind::Exec(ExecErrorKind::CpuBudgetExceeded)), 503);
        assert_eq!(status(ErrorKind::Exec(ExecErrorKind::DeadlineExceeded)), 504);
        assert_eq!(status(ErrorKind::BodyTooLarge), 413);
        assert_eq!(ErrorKind::Exec(ExecErrorKind::Capacity).source(), Source::Host);
        assert_eq!(ErrorKind::Exec(ExecErrorKind::Trap).source(), Source::Worker);
        assert_eq!(ErrorKind::NoRoute.source(), Source::Client);
        assert_eq!(status(ErrorKind::UpstreamConnect), 502);
        assert_eq!(status(ErrorKind::UpstreamBadResponse), 502);
        assert_eq!(status(ErrorKind::UpstreamTimeout), 504);
        assert_eq!(ErrorKind::UpstreamTimeout.source(), Source::Upstream);
        assert_eq!(ErrorKind::UpstreamNotGranted.source(), Source::Worker);
    }

    #[test]
    fn responses_are_short_json_with_the_right_headers() {
        let e = RequestError::new(ErrorKind::Overloaded, "secret detail");
        let r = e.response(RequestId(0xabc));
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["retry-after"], "1");
        let body = format!("{:?}", r.body());
        assert!(
            body.contains(r#"{\"error\":\"overloaded\",\"request_id\":\"0000000000000abc\"}"#),
            "{body}"
        );
        assert!(!body.contains("secret"));

        let r = RequestError::new(ErrorKind::MethodNotAllowed(vec![Method::GET, Method::PUT]), "")
            .response(RequestId(1));
        assert_eq!(r.headers()["allow"], "GET, PUT");
        assert!(r.headers().get("retry-after").is_none());
    }
}
