//! Forwarding through the gateway to real loopback upstreams: what the upstream receives,
//! what the client gets back, and each way an upstream can fail.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use edgegate_testkit::{Signer, now};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};

use super::servers::{Misbehave, Raw, Upstream, closed_port};
use super::*;

/// A gateway whose auth-router forwards `aud: service-a` to `a` and `service-b` to `b`.
async fn auth_gateway(a: &str, b: &str, extra: &str) -> Gateway {
    auth_gateway_with(a, "first_byte_timeout = \"300ms\"\nidle_timeout = \"300ms\"", b, extra).await
}

/// [`auth_gateway`] with `a_settings` as service-a's timeouts.
async fn auth_gateway_with(a: &str, a_settings: &str, b: &str, extra: &str) -> Gateway {
    let jwk = Signer::hs256().jwk(Some("k1")).to_string();
    let text = format!(
        r#"
        [runtime]
        cache = false

        [workers.auth]
        module = "builtin:auth-router"
        upstreams = ["service-a", "service-b"]
        config = {{ claim_headers = "sub:x-jwt-sub" }}

        [workers.auth.jwt]
        [[workers.auth.jwt.keys]]
        jwk = '{jwk}'

        [workers.hostile]
        module = "{hostile}"
        upstreams = ["service-a"]

        [[routes]]
        prefix = "/h"
        worker = "hostile"

        [[routes]]
        prefix = "/"
        worker = "auth"

        [upstreams.service-a]
        url = "{a}"
        {a_settings}

        [upstreams.service-b]
        url = "{b}"

        [upstreams.nowhere]
        url = "{b}"
        {extra}
        "#,
        hostile = edgegate_guests::HOSTILE,
    );
    let loaded = Loaded::from_text(&text, "test.toml", PathBuf::new()).unwrap();
    Gateway::build(&loaded, BUILTINS).await.unwrap()
}

fn token(aud: &str) -> String {
    Signer::hs256()
        .token(Some("k1"), &serde_json::json!({"aud": aud, "sub": "ada", "exp": now() + 60}))
}

fn authorized(method: Method, path: &str, aud: &str, body: &'static str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "api.example:8080")
        .header("authorization", format!("Bearer {}", token(aud)))
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap()
}

fn url(addr: std::net::SocketAddr) -> String {
    format!("http://{addr}")
}

#[tokio::test]
async fn a_verified_request_reaches_the_upstream_with_its_claims_and_nothing_hop_by_hop() {
    let upstream = Upstream::json().await;
    let g = auth_gateway(&url(upstream.addr), &url(upstream.addr), "").await;
    let mut r = authorized(Method::POST, "/orders/7?expand=items", "service-a", r#"{"qty":2}"#);
    let h = r.headers_mut();
    h.insert("x-jwt-sub", "root".parse().unwrap()); // a client's forged claim
    h.insert("connection", "x-client-hop".parse().unwrap());
    h.insert("x-client-hop", "1".parse().unwrap());
    h.insert("te", "trailers".parse().unwrap());
    h.insert("x-forwarded-for", "10.9.9.9".parse().unwrap());
    h.insert("x-end-to-end", "kept".parse().unwrap());
    let (status, headers, body) = send(&g, r).await;

    assert_eq!(
        (status, body.as_str()),
        (StatusCode::CREATED, r#"{"ok":true}"#),
        "the upstream's answer"
    );
    assert_eq!(headers["x-upstream"], "yes");
    assert!(headers.get("x-upstream-secret").is_none() && headers.get("keep-alive").is_none());
    assert_eq!(headers["x-request-id"].len(), 16);

    let seen = upstream.requests();
    assert_eq!(seen.len(), 1);
    let seen = &seen[0];
    assert_eq!(
        (seen.method.as_str(), seen.uri.to_string().as_str()),
        ("POST", "/orders/7?expand=items")
    );
    assert_eq!(&seen.body[..], br#"{"qty":2}"#);
    let h = &seen.headers;
    assert_eq!(h["x-jwt-sub"], "ada", "the verified claim replaced the client's");
    assert!(h.get("authorization").is_none(), "the token stays at the edge");
    assert!(
        h.get("x-client-hop").is_none() && h.get("te").is_none() && h.get("connection").is_none()
    );
    assert_eq!(h["x-forwarded-for"], "127.0.0.1", "the peer, not what the client claimed");
    assert_eq!(h["x-forwarded-proto"], "http");
    assert_eq!(h["x-forwarded-host"], "api.example:8080");
    assert_eq!(h["host"], upstream.addr.to_string().as_str(), "the upstream's own authority");
    assert_eq!(h["x-end-to-end"], "kept");
    assert_eq!(h["content-length"], "9");
}

#[tokio::test]
async fn the_audience_picks_the_upstream_and_connections_are_reused() {
    let (a, b) = (Upstream::json().await, Upstream::json().await);
    let g = auth_gateway(&url(a.addr), &url(b.addr), "").await;
    for _ in 0..3 {
        assert_eq!(send(&g, authorized(Method::GET, "/x", "service-a", "")).await.0, 201);
    }
    assert_eq!(send(&g, authorized(Method::GET, "/x", "service-b", "")).await.0, 201);
    assert_eq!((a.requests().len(), b.requests().len()), (3, 1));
    assert_eq!(
        a.connections.load(Ordering::SeqCst),
        1,
        "three requests, one kept-alive connection"
    );
    let (status, _, body) = send(&g, authorized(Method::GET, "/x", "service-z", "")).await;
    assert_eq!((status.as_u16(), body.as_str()), (403, r#"{"error":"unknown_audience"}"#));
}

#[tokio::test]
async fn an_upstream_that_is_down_is_502() {
    let down = closed_port().await;
    let g = auth_gateway(&url(down), &url(down), "").await;
    let (status, _, body) = send(&g, authorized(Method::GET, "/x", "service-a", "")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (502, "upstream_connect_failed"));
}

#[tokio::test]
async fn an_upstream_that_hangs_is_504() {
    let hang = Raw::start(Misbehave::Hang).await;
    let g = auth_gateway(&url(hang.addr), &url(hang.addr), "").await;
    let (status, _, body) = send(&g, authorized(Method::GET, "/x", "service-a", "")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (504, "upstream_timeout"));
}

#[tokio::test]
async fn an_upstream_that_answers_garbage_is_502() {
    let garbage = Raw::start(Misbehave::Garbage).await;
    let g = auth_gateway(&url(garbage.addr), &url(garbage.addr), "").await;
    let (status, _, body) = send(&g, authorized(Method::GET, "/x", "service-a", "")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (502, "upstream_bad_response"));
}

#[tokio::test]
async fn a_request_that_may_have_arrived_is_never_sent_twice() {
    let closer = Raw::start(Misbehave::CloseAfterRequest).await;
    let g = auth_gateway(&url(closer.addr), &url(closer.addr), "").await;
    for method in [Method::POST, Method::GET] {
        closer.requests.store(0, Ordering::SeqCst);
        let (status, _, body) =
            send(&g, authorized(method.clone(), "/pay", "service-a", "{}")).await;
        assert_eq!(
            (status.as_u16(), error_code(&body).as_str()),
            (502, "upstream_bad_response"),
            "{method}"
        );
        assert_eq!(closer.requests.load(Ordering::SeqCst), 1, "{method}: exactly one attempt");
    }
}

#[tokio::test]
async fn a_body_that_stalls_is_cut_at_the_idle_timeout() {
    let stall = Raw::start(Misbehave::StallBody).await;
    let g = auth_gateway(&url(stall.addr), &url(stall.addr), "").await;
    let response = g.handle(authorized(Method::GET, "/x", "service-a", ""), client()).await;
    assert_eq!(response.status(), 200, "the head arrived in time");
    let collected =
        tokio::time::timeout(Duration::from_secs(10), response.into_body().collect()).await;
    assert!(collected.expect("cut, not hung").is_err(), "the body ends in an error");
}

#[tokio::test]
async fn workers_reach_only_the_upstreams_they_are_granted() {
    let upstream = Upstream::json().await;
    let g = auth_gateway(&url(upstream.addr), &url(upstream.addr), "").await;
    // The hostile guest forwards to `nowhere`: an upstream that exists, not granted to it.
    let (status, _, body) = send(&g, request(Method::GET, "/h/forward", "")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (500, "upstream_not_granted"));
    assert!(upstream.requests().is_empty());
}

#[tokio::test]
async fn trusted_forwarding_headers_are_extended() {
    let upstream = Upstream::json().await;
    let g =
        auth_gateway(&url(upstream.addr), &url(upstream.addr), "[server]\ntrust_forwarded = true")
            .await;
    let mut r = authorized(Method::GET, "/x", "service-a", "");
    r.headers_mut().insert("x-forwarded-for", "198.51.100.4".parse().unwrap());
    r.headers_mut().insert("x-forwarded-proto", "https".parse().unwrap());
    assert_eq!(send(&g, r).await.0, 201);
    let seen = &upstream.requests()[0].headers;
    assert_eq!(seen["x-forwarded-for"], "198.51.100.4, 127.0.0.1");
    assert_eq!(seen["x-forwarded-proto"], "https");
}

#[tokio::test]
async fn an_upstream_that_never_accepts_is_504_at_the_connect_timeout() {
    // A listener with a backlog of one that never accepts: once the queue is full, the kernel
    // drops new SYNs and a connect hangs until the gateway gives up.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        let attempt =
            tokio::time::timeout(Duration::from_millis(200), tokio::net::TcpStream::connect(addr));
        if let Ok(Ok(stream)) = attempt.await {
            fillers.push(stream);
        }
    }
    // Only the connect timeout can end this: the response head may take an hour.
    let settings = "connect_timeout = \"300ms\"\nfirst_byte_timeout = \"1h\"";
    let g = auth_gateway_with(&url(addr), settings, &url(addr), "").await;
    let (status, _, body) = send(&g, authorized(Method::GET, "/x", "service-a", "")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (504, "upstream_timeout"));
    drop((listener, fillers));
}

/// A gateway with a route that proxies `/legacy` to `upstream` with no worker.
async fn proxy_gateway(upstream: &str) -> Gateway {
    let text = format!(
        r#"
        [runtime]
        cache = false

        [[routes]]
        prefix = "/legacy"
        upstream = "node"

        [upstreams.node]
        url = "{upstream}"
        first_byte_timeout = "300ms"
        "#
    );
    let loaded = Loaded::from_text(&text, "test.toml", PathBuf::new()).unwrap();
    Gateway::build(&loaded, BUILTINS).await.unwrap()
}

#[tokio::test]
async fn an_upstream_route_proxies_the_request_as_it_came() {
    let upstream = Upstream::json().await;
    let g = proxy_gateway(&url(upstream.addr)).await;
    let mut r = Request::builder()
        .method(Method::PUT)
        .uri("/legacy/items/3?full=1")
        .header("host", "api.example")
        .header("authorization", "Bearer kept-for-the-backend")
        .header("connection", "x-hop")
        .header("x-hop", "1")
        .body(Full::new(Bytes::from_static(b"payload")))
        .unwrap();
    r.headers_mut().insert("x-end-to-end", "kept".parse().unwrap());
    // What only a proxy, or the gateway itself, may say.
    let forged = ["x-edgegate-shadow", "x-forwarded-port", "x-forwarded-ssl", "x-real-ip"];
    for name in forged {
        r.headers_mut().insert(name, "1".parse().unwrap());
    }
    let (status, headers, body) = send(&g, r).await;
    assert_eq!((status, body.as_str()), (StatusCode::CREATED, r#"{"ok":true}"#));
    assert_eq!(headers["x-upstream"], "yes");

    let seen = upstream.requests();
    let seen = &seen[0];
    assert_eq!(
        (seen.method.as_str(), seen.uri.to_string().as_str()),
        ("PUT", "/legacy/items/3?full=1")
    );
    assert_eq!(&seen.body[..], b"payload");
    let h = &seen.headers;
    assert_eq!(h["authorization"], "Bearer kept-for-the-backend", "no worker took it");
    assert!(h.get("x-hop").is_none() && h.get("connection").is_none());
    assert_eq!(h["x-forwarded-for"], "127.0.0.1");
    assert_eq!(h["x-forwarded-host"], "api.example");
    assert_eq!(h["x-end-to-end"], "kept");
    for name in forged {
        assert!(h.get(name).is_none(), "the client's {name} reached the upstream");
    }

    // Down: 502, as for a worker's forward.
    let g = proxy_gateway(&url(closed_port().await)).await;
    let r = Request::get("/legacy").header("host", "x").body(Full::new(Bytes::new())).unwrap();
    let (status, _, body) = send(&g, r).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
}
