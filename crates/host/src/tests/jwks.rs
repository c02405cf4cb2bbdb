//! Keys from a JWKS URL served by a real loopback server: fetched at start, refreshed from the
//! cache headers, revalidated with ETags, kept while stale, dropped after, and over TLS.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use edgegate_testkit::{Signer, now};
use http::{Method, Request, Response};
use http_body_util::Full;

use super::servers::{Upstream, self_signed};
use super::*;

/// What the JWKS server serves.
struct Jwks {
    keys: Vec<serde_json::Value>,
    etag: Option<&'static str>,
    cache_control: &'static str,
    failing: bool,
    fetches: usize,
    not_modified: usize,
}

type Shared = Arc<Mutex<Jwks>>;

fn jwks(keys: Vec<serde_json::Value>) -> Shared {
    Arc::new(Mutex::new(Jwks {
        keys,
        etag: None,
        cache_control: "max-age=0",
        failing: false,
        fetches: 0,
        not_modified: 0,
    }))
}

fn serve(
    state: &Shared,
) -> impl Fn(&servers::Seen) -> Response<Full<Bytes>> + Send + Sync + 'static {
    let state = state.clone();
    move |seen| {
        let mut s = state.lock().unwrap();
        s.fetches += 1;
        if s.failing {
            return Response::builder().status(500).body(Full::new(Bytes::new())).unwrap();
        }
        if let (Some(etag), Some(sent)) = (s.etag, seen.headers.get("if-none-match"))
            && sent == etag
        {
            s.not_modified += 1;
            return Response::builder()
                .status(304)
                .header("cache-control", s.cache_control)
                .body(Full::new(Bytes::new()))
                .unwrap();
        }
        let mut response = Response::builder()
            .header("content-type", "application/json")
            .header("cache-control", s.cache_control);
        if let Some(etag) = s.etag {
            response = response.header("etag", etag);
        }
        let body = serde_json::json!({"keys": s.keys}).to_string();
        response.body(Full::new(Bytes::from(body))).unwrap()
    }
}

/// A gateway whose auth-router trusts the keys at `jwks_url`, forwarding to `origin`.
async fn gateway_for(jwks_url: &str, origin: &Upstream, source_extra: &str) -> Gateway {
    let text = format!(
        r#"
        [runtime]
        cache = false

        [workers.auth]
        module = "builtin:auth-router"
        upstreams = ["service-a"]

        [workers.auth.jwt]
        [[workers.auth.jwt.keys]]
        jwks_url = "{jwks_url}"
        min_refresh = "50ms"
        timeout = "2s"
        {source_extra}

        [[routes]]
        prefix = "/"
        worker = "auth"

        [upstreams.service-a]
        url = "http://{origin}"
        "#,
        origin = origin.addr,
    );
    let loaded = Loaded::from_text(&text, "test.toml", PathBuf::new()).unwrap();
    Gateway::build(&loaded, BUILTINS).await.unwrap()
}

fn with(signer: &Signer, kid: &str) -> Request<Full<Bytes>> {
    let token =
        signer.token(Some(kid), &serde_json::json!({"aud": "service-a", "exp": now() + 60}));
    Request::builder()
        .method(Method::GET)
        .uri("/x")
        .header("host", "localhost")
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Sends until the answer is `want` (background refreshes take a moment); panics after 20 s.
async fn eventually(g: &Gateway, signer: &Signer, kid: &str, want: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _, body) = send(g, with(signer, kid)).await;
        if status.as_u16() == want {
            return body;
        }
        assert!(Instant::now() < deadline, "still {status} {body}, waiting for {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn keys_are_fetched_at_start_and_follow_a_rotation() {
    let (es, ed) = (Signer::es256(), Signer::eddsa());
    let state = jwks(vec![es.jwk(Some("old"))]);
    let server = Upstream::start(serve(&state)).await;
    let origin = Upstream::json().await;
    let g = gateway_for(&format!("http://{}/jwks.json", server.addr), &origin, "").await;
    // Fetched before the gateway was ready: the first request already passes.
    assert_eq!(send(&g, with(&es, "old")).await.0, 201);
    assert!(send(&g, with(&ed, "new")).await.1.get("www-authenticate").is_some(), "not yet");

    state.lock().unwrap().keys = vec![ed.jwk(Some("new"))];
    eventually(&g, &ed, "new", 201).await;
    let body = eventually(&g, &es, "old", 401).await;
    assert_eq!(body, r#"{"error":"unknown_kid"}"#, "the rotated-out key is gone");
    assert_eq!(server.requests()[0].uri.path(), "/jwks.json");
}

#[tokio::test]
async fn an_unchanged_set_is_revalidated_with_its_etag() {
    let es = Signer::es256();
    let state = jwks(vec![es.jwk(Some("k"))]);
    state.lock().unwrap().etag = Some("\"v1\"");
    let server = Upstream::start(serve(&state)).await;
    let origin = Upstream::json().await;
    let g = gateway_for(&format!("http://{}/jwks", server.addr), &origin, "").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while state.lock().unwrap().not_modified < 2 {
        assert!(Instant::now() < deadline, "no conditional refresh");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(send(&g, with(&es, "k")).await.0, 201, "304 keeps the keys");
}

#[tokio::test]
async fn a_source_that_is_down_is_503_until_it_answers() {
    let es = Signer::es256();
    let state = jwks(vec![es.jwk(Some("k"))]);
    state.lock().unwrap().failing = true;
    let server = Upstream::start(serve(&state)).await;
    let origin = Upstream::json().await;
    let g = gateway_for(&format!("http://{}/jwks", server.addr), &origin, "").await;
    let (status, _, body) = send(&g, with(&es, "k")).await;
    assert_eq!(
        (status.as_u16(), error_code(&body).as_str()),
        (503, "worker_unavailable"),
        "not the token's fault"
    );
    state.lock().unwrap().failing = false;
    eventually(&g, &es, "k", 201).await;
}

#[tokio::test]
async fn stale_keys_are_kept_for_max_stale_then_dropped() {
    let es = Signer::es256();
    let state = jwks(vec![es.jwk(Some("k"))]);
    let server = Upstream::start(serve(&state)).await;
    let origin = Upstream::json().await;
    let g = gateway_for(&format!("http://{}/jwks", server.addr), &origin, "max_stale = \"300ms\"")
        .await;
    assert_eq!(send(&g, with(&es, "k")).await.0, 201);
    state.lock().unwrap().failing = true;
    let body = eventually(&g, &es, "k", 503).await;
    assert_eq!(error_code(&body), "worker_unavailable");
    assert!(state.lock().unwrap().fetches >= 2, "it kept trying");
}

#[tokio::test]
async fn https_sources_are_verified_against_the_configured_ca() {
    let es = Signer::es256();
    let state = jwks(vec![es.jwk(Some("k"))]);
    let (acceptor, ca_pem) = self_signed();
    let server = Upstream::start_tls(acceptor, serve(&state)).await;
    let origin = Upstream::json().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let url = format!("https://localhost:{}/jwks", server.addr.port());

    let trusted =
        gateway_for(&url, &origin, &format!("ca_file = {:?}", ca.display().to_string())).await;
    assert_eq!(send(&trusted, with(&es, "k")).await.0, 201);

    // The public roots do not know a self-signed certificate: no keys, so 503.
    let untrusted = gateway_for(&url, &origin, "").await;
    assert_eq!(send(&untrusted, with(&es, "k")).await.0, 503);
}
