//! `auth-router`: the gateway worker. It verifies `Authorization: Bearer <JWT>`, picks the
//! upstream from a claim through a route table compiled into the module, and forwards the
//! request there with the verified claims in headers.
//!
//! ```text
//!  bearer token ─▶ jwt::verify (keys in the host) ─▶ claim `aud` ─▶ UPSTREAMS (binary search)
//!      │ 401 invalid_token                               │ 403 unknown_audience
//!      ▼                                                 ▼
//!                               Forward { upstream, x-jwt-* claim headers, no Authorization }
//! ```
//!
//! Configuration (`[workers.NAME.config]`, all optional):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `route_claim` | `aud` | the claim whose value (a string, or the first of an array that has a route) picks the upstream |
//! | `claim_headers` | none | `claim:header` pairs, comma-separated: each claim is sent upstream in that header (and a client's own header of that name is removed) |
//! | `forward_authorization` | `false` | whether the `Authorization` header goes upstream too |
//! | `dry_run` | `false` | answer 200 with the decision as JSON instead of forwarding: `{"upstream":"service-a","set":{"x-jwt-sub":"ada"}}` (the benchmark lab's auth-check workload; a way to see what a token would do) |
//! | `verify_in` | `guest` | `guest`: the token is taken apart and its claims checked in the guest, the host checking only the signature (`jwt::verify` with `HostKeys`); `host`: one host call (`jwt::verify_in_host`) verifies the whole token and answers only the claims this worker reads. Both cost the same today (see `docs/auth.md`) |
//!
//! The token policy (issuer, audiences, leeway, required claims, size cap) and the keys come
//! from the gateway's `[workers.NAME.jwt]` table; see `docs/auth.md`.
//!
//! ```text
//! curl -H "Authorization: Bearer $TOKEN" localhost:8080/auth/orders
//! {"upstream":"service-a","method":"GET","path":"/auth/orders","headers":{"x-jwt-sub":"ada",…}}
//! ```

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

use edgegate_sdk::json::Value;
use edgegate_sdk::jwt::{self, Jwt, Validation};
use edgegate_sdk::router::StaticRoutes;
use edgegate_sdk::{Forward, LogLevel, Request, Response, host};

/// Which upstream serves which audience. Sorted by audience: `StaticRoutes::new` refuses to
/// compile a table that is not.
pub static UPSTREAMS: StaticRoutes<&str> =
    StaticRoutes::new(&[("service-a", "service-a"), ("service-b", "service-b")]);

/// Claim header values are cut at this length; longer ones are not forwarded.
const MAX_CLAIM_HEADER: usize = 4096;

/// The worker's own settings, from its configuration.
struct Settings {
    route_claim: String,
    claim_headers: String,
    forward_authorization: bool,
    dry_run: bool,
    verify_in_host: bool,
}

impl Settings {
    fn from_table(config: &host::Config) -> Self {
        let mut settings = Self {
            route_claim: "aud".into(),
            claim_headers: String::new(),
            forward_authorization: false,
            dry_run: false,
            verify_in_host: false,
        };
        for (key, value) in config.iter() {
            match key {
                "route_claim" => settings.route_claim = value.into(),
                "claim_headers" => settings.claim_headers = value.into(),
                "forward_authorization" => settings.forward_authorization = value == "true",
                "dry_run" => settings.dry_run = value == "true",
                "verify_in" => settings.verify_in_host = value == "host",
                _ => {}
            }
        }
        settings
    }

    /// `(claim, header)` pairs.
    fn claim_headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.claim_headers
            .split(',')
            .filter_map(|pair| pair.split_once(':'))
            .map(|(claim, header)| (claim.trim(), header.trim()))
            .filter(|(claim, header)| !claim.is_empty() && !header.is_empty())
    }
}

/// The request's token, verified where the settings say:
///
/// * by default, in the guest, the host checking only the signature;
/// * with `verify_in = "host"`, by the host in one call, which answers only the claims this
///   worker reads (`wanted`);
/// * with the `guest-crypto` or `guest-hs256` feature, in the guest against a JWK Set in the
///   worker's configuration.
fn verify(
    req: &Request,
    config: &host::Config,
    settings: &Settings,
    wanted: &[(&str, &str)],
) -> Result<Jwt, jwt::Error> {
    let token = jwt::bearer_token(req)?;
    let in_guest = |keys: &dyn jwt::Verifier| {
        jwt::verify(token, &Validation::from_table(config), keys, host::unix_time())
    };
    #[cfg(any(feature = "guest-crypto", feature = "guest-hs256"))]
    {
        let _ = (settings, wanted);
        let keys = jwt::guest::GuestKeys::from_config().map_err(|_| jwt::Error::NotConfigured)?;
        in_guest(&keys)
    }
    #[cfg(not(any(feature = "guest-crypto", feature = "guest-hs256")))]
    if settings.verify_in_host {
        let claims = wanted.iter().map(|(claim, _)| *claim);
        let names: Vec<&str> =
            core::iter::once(settings.route_claim.as_str()).chain(claims).collect();
        jwt::verify_in_host(&names)
    } else {
        in_guest(&jwt::HostKeys)
    }
}

/// Verifies, routes and forwards.
pub fn handle(req: &Request) -> Response {
    // One host call for the whole configuration: the token policy and the worker's settings.
    let config = host::Config::load();
    let settings = Settings::from_table(&config);
    let wanted: Vec<(&str, &str)> = settings.claim_headers().collect();
    let token = match verify(req, &config, &settings, &wanted) {
        Ok(token) => token,
        Err(e) => {
            // Concatenated rather than formatted: `core::fmt` would cost the module kilobytes.
            let mut line = String::from("token refused: ");
            line.push_str(e.code());
            host::log(LogLevel::Info, &line);
            return e.response();
        }
    };
    // One pass over the claims for the route claim and every claim header.
    let mut values: Vec<Option<Value<'_>>> = alloc::vec![None; wanted.len()];
    let mut route = None;
    for (key, value) in token.claims().iter() {
        if key.eq_str(&settings.route_claim) {
            route = Some(value);
        }
        for ((claim, _), slot) in wanted.iter().zip(values.iter_mut()) {
            if key.eq_str(claim) {
                *slot = Some(value);
            }
        }
    }
    let Some(upstream) =
        route.into_iter().flat_map(Value::strings).find_map(|value| UPSTREAMS.get_json(value))
    else {
        return Response::builder(403)
            .header("content-type", "application/json")
            .body(br#"{"error":"unknown_audience"}"#);
    };
    if settings.dry_run {
        return decision(
            upstream,
            wanted
                .iter()
                .zip(values)
                .filter_map(|((_, header), value)| Some((*header, value.and_then(header_value)?))),
        );
    }
    let mut forward = Forward::to(upstream);
    for ((_, header), value) in wanted.iter().zip(values) {
        // Set replaces whatever the client sent under that name; a claim the token lacks
        // removes it, so a client can never supply a "verified" claim itself.
        forward = match value.and_then(header_value) {
            Some(value) => forward.set_header(header, value),
            None => forward.remove_header(header),
        };
    }
    if !settings.forward_authorization {
        forward = forward.remove_header("authorization");
    }
    forward.into()
}

/// The dry run's answer: `{"upstream":NAME,"set":{HEADER:VALUE,…}}`, the headers in
/// configuration order.
fn decision<'a>(upstream: &str, set: impl Iterator<Item = (&'a str, Vec<u8>)>) -> Response {
    let mut body = Vec::with_capacity(128);
    body.extend_from_slice(br#"{"upstream":"#);
    json_string(&mut body, upstream.as_bytes());
    body.extend_from_slice(br#","set":{"#);
    for (i, (header, value)) in set.enumerate() {
        if i > 0 {
            body.push(b',');
        }
        json_string(&mut body, header.as_bytes());
        body.push(b':');
        json_string(&mut body, &value);
    }
    body.extend_from_slice(b"}}");
    Response::json(200, &body)
}

/// `text` as a JSON string. Header names and values are visible ASCII, tabs and UTF-8 (see
/// [`header_value`]): only `"`, `\` and tab need escaping.
fn json_string(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    for &b in text {
        match b {
            b'"' => out.extend_from_slice(br#"\""#),
            b'\\' => out.extend_from_slice(br"\\"),
            b'\t' => out.extend_from_slice(br"\t"),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// A claim as a header value: a string as itself, a number or boolean as written, an array of
/// strings joined with `,`. Objects, null, and anything a header cannot carry are left out.
fn header_value(value: Value<'_>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match value {
        Value::String(s) => {
            if !s.decode_into(&mut out, MAX_CLAIM_HEADER) {
                return None;
            }
        }
        Value::Number(_) | Value::Bool(_) => out.extend_from_slice(value.raw().as_bytes()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let s = item.as_json_str()?;
                if i > 0 {
                    out.push(b',');
                }
                let room = MAX_CLAIM_HEADER.saturating_sub(out.len());
                if !s.decode_into(&mut out, room) {
                    return None;
                }
            }
        }
        Value::Object(_) | Value::Null => return None,
    }
    // What HTTP allows in a field value: visible ASCII, space, tab and obs-text.
    let valid = out.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80);
    valid.then_some(out)
}

edgegate_sdk::export!(handle);

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::json;

    #[test]
    fn claims_become_header_values_or_nothing() {
        let doc = br#"{"s":"ada","e":"caf\u00e9","n":42,"b":true,"a":["x","y"],"o":{},"z":null,
                       "bad":"line\nbreak","mixed":["x",1]}"#;
        let claims = json::parse(doc).unwrap().as_object().unwrap();
        let value = |name| claims.get(name).and_then(header_value);
        assert_eq!(value("s").as_deref(), Some(&b"ada"[..]));
        assert_eq!(value("e").as_deref(), Some("café".as_bytes()));
        assert_eq!(value("n").as_deref(), Some(&b"42"[..]));
        assert_eq!(value("b").as_deref(), Some(&b"true"[..]));
        assert_eq!(value("a").as_deref(), Some(&b"x,y"[..]));
        for skipped in ["o", "z", "bad", "mixed", "missing"] {
            assert_eq!(value(skipped), None, "{skipped}");
        }
    }

    #[test]
    fn a_dry_run_answers_with_the_decision_as_json() {
        let set = [("x-jwt-sub", b"ada".to_vec()), ("x-q", br#"a"b\c	d"#.to_vec())];
        let r = decision("service-a", set.into_iter());
        assert_eq!(r.status(), 200);
        let body: serde_json::Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(body["upstream"], "service-a");
        assert_eq!(body["set"]["x-jwt-sub"], "ada");
        assert_eq!(body["set"]["x-q"], "a\"b\\c\td");
        let none = decision("service-b", core::iter::empty());
        assert_eq!(none.body(), br#"{"upstream":"service-b","set":{}}"#);
    }

    #[test]
    fn every_audience_in_the_table_routes_to_itself() {
        for (audience, upstream) in UPSTREAMS.entries() {
            assert_eq!(UPSTREAMS.get(audience), Some(upstream));
        }
        assert_eq!(UPSTREAMS.get("service-c"), None);
    }

    #[test]
    fn natively_there_are_no_host_keys() {
        use edgegate_sdk::testing::TestRequest;
        let t = TestRequest::new("GET", "/auth/x").header("authorization", "Bearer a.b.c");
        // "a" is not base64 of a JSON header: refused before any key is asked for.
        assert_eq!(handle(&t.request()).status(), 401);
        let t = TestRequest::new("GET", "/auth/x");
        let r = handle(&t.request());
        assert_eq!((r.status(), r.header("www-authenticate")), (401, Some(&b"Bearer"[..])));
    }
}
