//! A split route's shadow through the real binary, against two real loopback upstreams: each
//! kind of difference counted, a shadow that hangs or fails changing nothing for the client,
//! a POST not shadowed, a body over the cap skipped. And claim rules, with what became of
//! each request's token counted.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use edgegate_testkit::{HMAC_SECRET, Signer, now};

use crate::support::{Gateway, Seen, counter, get, http, serve_http};

/// An HTTP/1.1 answer.
fn answer(status: u16, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn path(seen: &Seen) -> String {
    seen.head.split(' ').nth(1).unwrap_or_default().to_owned()
}

fn metric(gw: &Gateway, outcome: &str) -> u64 {
    counter(gw, &format!("edgegate_shadow_total{{route=\"api\",outcome=\"{outcome}\"}}"))
}

/// A configuration whose `/api` route sends everything to `legacy` (weight `weight`, `wasm`
/// none) and shadows it to `wasm` with `shadow` (more keys of the shadow table).
fn config(legacy: SocketAddr, wasm: SocketAddr, weight: u32, shadow: &str) -> String {
    format!(
        r#"
        [upstreams.node]
        url = "http://{legacy}"

        [upstreams.edge]
        url = "http://{wasm}"

        [[routes]]
        name = "api"
        prefix = "/api"

        [routes.split]
        targets = [
          {{ name = "legacy", upstream = "node", weight = {weight} }},
          {{ name = "wasm", upstream = "edge" }},
        ]
        shadow = {{ target = "wasm"{shadow} }}
        "#
    )
}

#[test]
fn the_shadow_counts_each_difference_and_never_touches_the_client() {
    let legacy = serve_http(|_, _| answer(200, "text/plain", "same"));
    let shadowed: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = shadowed.clone();
    let wasm = serve_http(move |request, _| {
        let path = path(&request);
        if request.header("x-edgegate-shadow") == Some("1") {
            seen.lock().unwrap().push(path.clone());
        }
        match path.as_str() {
            "/api/status" => answer(500, "text/plain", "same"),
            "/api/header" => answer(200, "application/json", "same"),
            "/api/body" => answer(200, "text/plain", "different"),
            "/api/hang" => {
                std::thread::sleep(Duration::from_secs(3));
                answer(200, "text/plain", "same")
            }
            _ => answer(200, "text/plain", "same"),
        }
    });
    let config = config(legacy, wasm, 100, ", timeout = \"300ms\", max_body = \"1KiB\"");
    let gw = Gateway::start(&config);
    for path in ["/api/same", "/api/status", "/api/header", "/api/body"] {
        let reply = get(gw.addr, path);
        assert_eq!((reply.status, reply.text().as_str()), (200, "same"), "{path}");
    }
    // A shadow that hangs: the client has the primary's answer at once.
    let started = Instant::now();
    let reply = get(gw.addr, "/api/hang");
    assert_eq!((reply.status, reply.text().as_str()), (200, "same"));
    assert!(started.elapsed() < Duration::from_millis(250), "{:?}", started.elapsed());
    // Not shadowed: a POST (not a shadowed method), a body over the cap (counted skipped).
    assert_eq!(http(gw.addr, "POST", "/api/same", &[], b"x").status, 200);
    assert_eq!(http(gw.addr, "GET", "/api/big", &[], &[b'x'; 2048]).status, 200);

    let expected = [
        ("match", 1),
        ("status_diff", 1),
        ("header_diff", 1),
        ("body_diff", 1),
        ("shadow_error", 1),
        ("skipped", 1),
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    while expected.iter().any(|(o, n)| metric(&gw, o) != *n) {
        assert!(Instant::now() < deadline, "{:?}", expected.map(|(o, _)| (o, metric(&gw, o))));
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut paths = shadowed.lock().unwrap().clone();
    paths.sort();
    assert_eq!(paths, ["/api/body", "/api/hang", "/api/header", "/api/same", "/api/status"]);
}

/// A shadow target that is down is a `shadow_error`; the client is served as ever.
#[test]
fn a_shadow_target_that_is_down_changes_nothing_for_the_client() {
    let legacy = serve_http(|_, _| answer(200, "text/plain", "legacy"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let config = config(legacy, closed, 1, "");
    let gw = Gateway::start(&config);
    for _ in 0..5 {
        assert_eq!(get(gw.addr, "/api/x").text(), "legacy");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&gw, "shadow_error") != 5 {
        assert!(Instant::now() < deadline, "{}", metric(&gw, "shadow_error"));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A claim rule through the real binary, with the worker's key from the environment: only a
/// verified token's claim picks the target, and each token's fate is counted.
#[test]
fn a_claim_rule_routes_verified_tokens_and_counts_the_rest() {
    let legacy = serve_http(|_, _| answer(200, "text/plain", "legacy"));
    let wasm = serve_http(|_, _| answer(200, "text/plain", "wasm"));
    let config = format!(
        r#"
        [upstreams.node]
        url = "http://{legacy}"

        [upstreams.edge]
        url = "http://{wasm}"

        [workers.auth]
        module = "builtin:auth-router"

        [workers.auth.jwt]
        [[workers.auth.jwt.keys]]
        alg = "HS256"
        secret_env = "SPLIT_TEST_SECRET"

        [[routes]]
        name = "api"
        prefix = "/api"

        [routes.split]
        jwt = "auth"
        rules = [{{ claim = "plan", value = "beta", target = "wasm" }}]
        targets = [
          {{ name = "legacy", upstream = "node", weight = 1 }},
          {{ name = "wasm", upstream = "edge" }},
        ]
        "#
    );
    let secret = std::str::from_utf8(HMAC_SECRET).unwrap();
    let gw = Gateway::start_with(&config, &[], &[("SPLIT_TEST_SECRET", secret)]);
    let claims = serde_json::json!({"plan": "beta", "exp": now() + 60});
    let beta = format!("Bearer {}", Signer::hs256().token(None, &claims));
    let other = Signer::hmac(edgegate_runtime::keys::Alg::Hs256, &[1; 32]);
    let forged = format!("Bearer {}", other.token(None, &claims));
    let side = |auth: &[(&str, &str)]| http(gw.addr, "GET", "/api/x", auth, b"").text();
    assert_eq!(side(&[("authorization", &beta)]), "wasm");
    assert_eq!(side(&[("authorization", &beta)]), "wasm");
    assert_eq!(side(&[("authorization", &forged)]), "legacy");
    assert_eq!(side(&[]), "legacy");
    let claims = |outcome: &str| {
        counter(&gw, &format!("edgegate_split_claims_total{{route=\"api\",outcome=\"{outcome}\"}}"))
    };
    assert_eq!([claims("verified"), claims("invalid"), claims("missing")], [2, 1, 1]);
    let by_rule = "edgegate_split_total{route=\"api\",target=\"wasm\",by=\"rule\"}";
    assert_eq!(counter(&gw, by_rule), 2);
}
