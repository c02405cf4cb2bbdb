//! `fan-out`: one request, several upstreams at once, one merged JSON answer.
//!
//! For `GET /fanout/rest`, the worker fetches `upstream://NAME/rest` from every configured
//! upstream concurrently and answers `{"NAME": <its JSON>, …}` in the configured order. If an
//! upstream fails, or answers with something other than a 2xx JSON document, the answer is 502
//! naming it: `{"error":"upstream_failed","upstream":"service-b","reason":"timeout"}`.
//!
//! Configuration (`[workers.NAME.config]`):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `upstreams` | (required) | comma-separated upstream names; the worker must be granted each |
//! | `prefix` | `/fanout` | the path before the part that is sent on |
//!
//! ```text
//! curl localhost:8080/fanout/profile
//! {"service-a":{"upstream":"service-a",…},"service-b":{"upstream":"service-b",…}}
//! ```

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;

use edgegate_sdk::fetch::{self, FetchRequest, Pending};
use edgegate_sdk::host::Config;
use edgegate_sdk::json;
use edgegate_sdk::{HostError, Request, Response};

/// At most this many upstreams (the gateway's subrequest cap is 32 by default).
const MAX_UPSTREAMS: usize = 8;

fn reason(e: HostError) -> &'static str {
    match e {
        HostError::NotGranted => "not_granted",
        HostError::Timeout => "timeout",
        HostError::LimitExceeded => "too_large",
        HostError::Unavailable => "unavailable",
        _ => "error",
    }
}

fn failed(upstream: &str, reason: &str) -> Response {
    let mut body = Vec::new();
    for part in
        [r#"{"error":"upstream_failed","upstream":""#, upstream, r#"","reason":""#, reason, r#""}"#]
    {
        body.extend_from_slice(part.as_bytes());
    }
    Response::json(502, &body)
}

/// Serves one request.
pub fn handle(req: &Request) -> Response {
    let config = Config::load();
    let Some(names) = config.get("upstreams") else {
        return Response::json(500, br#"{"error":"no_upstreams_configured"}"#);
    };
    let prefix = config.get("prefix").unwrap_or("/fanout");
    let rest = req.target().strip_prefix(prefix).unwrap_or("/");
    let rest = if rest.starts_with('/') { rest } else { "/" };

    // Start every fetch before waiting for any: they run concurrently in the host.
    let mut started: Vec<(&str, Result<Pending, HostError>)> = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()).take(MAX_UPSTREAMS) {
        let mut url = Vec::with_capacity(11 + name.len() + rest.len());
        for part in ["upstream://", name, rest] {
            url.extend_from_slice(part.as_bytes());
        }
        let url = core::str::from_utf8(&url).unwrap_or("");
        started.push((name, fetch::start(&FetchRequest::get(url))));
    }

    let mut body = Vec::with_capacity(1024);
    body.push(b'{');
    for (i, (name, pending)) in started.into_iter().enumerate() {
        let response = match pending.and_then(Pending::wait) {
            Ok(response) => response,
            Err(e) => return failed(name, reason(e)),
        };
        if !(200..300).contains(&response.status()) {
            return failed(name, "bad_status");
        }
        if json::parse(response.body()).is_err() {
            return failed(name, "not_json");
        }
        if i > 0 {
            body.push(b',');
        }
        body.push(b'"');
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(b"\":");
        body.extend_from_slice(response.body());
    }
    body.push(b'}');
    Response::json(200, &body)
}

edgegate_sdk::export!(handle);

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::testing::TestRequest;

    #[test]
    fn without_upstreams_it_says_so() {
        assert_eq!(handle(&TestRequest::new("GET", "/fanout").request()).status(), 500);
    }

    #[test]
    fn failures_name_the_upstream() {
        let r = failed("service-b", reason(HostError::Timeout));
        assert_eq!(r.status(), 502);
        assert_eq!(
            r.body(),
            br#"{"error":"upstream_failed","upstream":"service-b","reason":"timeout"}"#
        );
    }
}
