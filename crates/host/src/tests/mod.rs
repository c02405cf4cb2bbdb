//! The gateway driven with `http::Request`s, no sockets: routing, body limits, the concurrency
//! limit, and how worker failures become statuses. The end-to-end suite repeats the essentials
//! over real sockets against the real binary.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};

use crate::config::Loaded;
use crate::{ConnInfo, Gateway};

mod forward;
pub(crate) mod headers;
mod jwks;
mod reload;
mod servers;
mod split;

const BUILTINS: &[(&str, &[u8])] = edgegate_guests::BUILTIN;

async fn gateway(extra: &str) -> Gateway {
    let text = format!(
        r#"
        [server]
        max_concurrency = 4
        max_request_body = "64KiB"
        body_read_timeout = "200ms"
        queue_timeout = "20ms"
        max_headers = 20

        [runtime]
        cache = false

        [workers.echo]
        module = "builtin:echo-json"
        limits = {{ request_body = "1KiB" }}

        [workers.hostile]
        module = "{hostile}"
        limits = {{ hostcalls = 1000000, cpu = "10s", deadline = "10s" }}

        [[routes]]
        path = "/echo"
        methods = ["POST"]
        worker = "echo"

        [[routes]]
        prefix = "/h"
        worker = "hostile"
        {extra}
        "#,
        hostile = edgegate_guests::HOSTILE,
    );
    let loaded = Loaded::from_text(&text, "test.toml", PathBuf::new()).unwrap();
    Gateway::build(&loaded, BUILTINS).await.unwrap()
}

async fn send<B>(gateway: &Gateway, request: Request<B>) -> (StatusCode, http::HeaderMap, String)
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let response = gateway.handle(request, client()).await;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, String::from_utf8_lossy(&body).into_owned())
}

/// A client on loopback.
fn client() -> ConnInfo {
    ConnInfo { peer: "127.0.0.1:40000".parse().unwrap(), tls: None }
}

fn request(method: Method, path: &str, body: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}

fn error_code(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap();
    value["error"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn routes_to_the_worker_and_tags_the_response() {
    let g = gateway("").await;
    let (status, headers, body) =
        send(&g, request(Method::POST, "/echo", r#"{"b":1,"a":[]}"#)).await;
    assert_eq!(status, 200);
    assert_eq!(body, r#"{"b":1,"a":[]}"#);
    assert_eq!(headers["x-request-id"].len(), 16);
}

#[tokio::test]
async fn a_respond_route_answers_without_a_worker_and_keeps_the_request_rules() {
    let g = gateway(
        r#"
        [[routes]]
        path = "/ping"
        methods = ["GET"]
        respond = { body = "pong" }

        [[routes]]
        path = "/gone"
        respond = { status = 410, body = '{"error":"gone"}', content_type = "application/json" }

        [[routes]]
        path = "/empty"
        respond = {}
        "#,
    )
    .await;
    let (status, headers, body) = send(&g, request(Method::GET, "/ping", "")).await;
    assert_eq!((status.as_u16(), body.as_str()), (200, "pong"));
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(headers["x-request-id"].len(), 16);
    let (status, headers, body) = send(&g, request(Method::GET, "/gone", "")).await;
    assert_eq!((status.as_u16(), body.as_str()), (410, r#"{"error":"gone"}"#));
    assert_eq!(headers["content-type"], "application/json");
    let (status, headers, body) = send(&g, request(Method::GET, "/empty", "")).await;
    assert_eq!((status.as_u16(), body.as_str()), (200, ""));
    assert!(headers.get("content-type").is_none());
    // The route's methods, the path rules and the Host rules still hold.
    assert_eq!(send(&g, request(Method::POST, "/ping", "")).await.0, 405);
    assert_eq!(send(&g, request(Method::GET, "/x/../ping", "")).await.0, 200);
    let mut no_host = request(Method::GET, "/ping", "");
    no_host.headers_mut().remove("host");
    assert_eq!(send(&g, no_host).await.0, 400);
}

#[tokio::test]
async fn unrouted_and_wrong_method() {
    let g = gateway("").await;
    let (status, headers, body) = send(&g, request(Method::GET, "/nowhere", "")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (404, "no_route"));
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(value["request_id"], headers["x-request-id"].to_str().unwrap());
    let (status, headers, body) = send(&g, request(Method::GET, "/echo", "")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (405, "method_not_allowed"));
    assert_eq!(headers["allow"], "POST");
}

#[tokio::test]
async fn bodies_over_the_route_limit_are_413() {
    let g = gateway("").await;
    let big = "x".repeat(1025);
    // Declared up front: refused before reading.
    let (status, _, body) = send(&g, request(Method::POST, "/echo", &big)).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (413, "body_too_large"));
    // Not declared: refused while reading.
    let mut r = request(Method::POST, "/echo", &big);
    r.headers_mut().remove("content-length");
    assert_eq!(send(&g, r).await.0, 413);
    // The worker's 1KiB limit is below the server's 64KiB: exactly 1KiB passes the limit.
    let exact = format!("\"{}\"", "x".repeat(1022));
    assert_eq!(send(&g, request(Method::POST, "/echo", &exact)).await.0, 200);
}

/// A body that never finishes.
struct Stalled;

impl Body for Stalled {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Pending
    }
}

#[tokio::test]
async fn a_body_that_never_arrives_is_408() {
    let g = gateway("").await;
    let r = Request::builder()
        .method(Method::POST)
        .uri("/echo")
        .header("host", "localhost")
        .body(Stalled)
        .unwrap();
    let (status, _, body) = send(&g, r).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (408, "body_timeout"));
}

#[tokio::test]
async fn too_many_headers_is_431() {
    let g = gateway("").await;
    let mut r = request(Method::POST, "/echo", "{}");
    for i in 0..25 {
        r.headers_mut()
            .insert(http::HeaderName::try_from(format!("x-{i}")).unwrap(), "v".parse().unwrap());
    }
    let (status, _, body) = send(&g, r).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (431, "too_many_headers"));
}

#[tokio::test]
async fn worker_failures_map_to_their_status() {
    let g = gateway("").await;
    for (path, status, code) in [
        ("/h/trap", 500, "worker_trap"),
        ("/h/panic", 500, "worker_trap"),
        ("/h/recurse", 500, "stack_overflow"),
        ("/h/alloc", 500, "out_of_memory"),
        ("/h/bad-header", 500, "invalid_response"),
        ("/h/forward", 500, "unknown_upstream"),
        ("/h/unavailable", 503, "worker_unavailable"),
    ] {
        let (got, _, body) = send(&g, request(Method::GET, path, "")).await;
        assert_eq!((got.as_u16(), error_code(&body).as_str()), (status, code), "{path}");
        assert!(!body.contains("backtrace") && !body.contains("wasm"), "no internals: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_concurrency_limit_requests_wait_then_get_503() {
    let g = Arc::new(gateway("").await);
    // Take all four slots with slow requests, then one more request must give up.
    let mut slow = Vec::new();
    for _ in 0..4 {
        let g = g.clone();
        slow.push(tokio::spawn(async move {
            send(&g, request(Method::GET, "/h/spin?ms=1500", "")).await.0
        }));
    }
    for _ in 0..1000 {
        if g.permits.available_permits() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(g.permits.available_permits(), 0, "the slow requests never took their slots");
    let (status, headers, body) = send(&g, request(Method::POST, "/echo", "{}")).await;
    assert_eq!((status.as_u16(), error_code(&body).as_str()), (503, "overloaded"));
    assert_eq!(headers["retry-after"], "1");
    for task in slow {
        assert_eq!(task.await.unwrap(), 200);
    }
    assert_eq!(send(&g, request(Method::POST, "/echo", "{}")).await.0, 200, "slots come back");
}

/// Builds a gateway from `text` and returns its configuration error.
async fn build_error(text: String) -> crate::config::ConfigError {
    let loaded = Loaded::from_text(&text, "bad.toml", PathBuf::new()).unwrap();
    Gateway::build(&loaded, BUILTINS).await.unwrap_err()
}

#[tokio::test]
async fn module_errors_name_the_worker_key() {
    let build = |module: &str| {
        build_error(format!("[runtime]\ncache = false\n[workers.w]\nmodule = \"{module}\"\n"))
    };
    let e = build("/no/such/module.wasm").await;
    assert_eq!(e.key.as_deref(), Some("workers.w.module"));
    assert!(e.message.contains("cannot read"), "{e}");
    let e = build(edgegate_guests::WRONG_ABI).await;
    assert_eq!(e.key.as_deref(), Some("workers.w.module"));
    assert!(crate::error::error_chain(&e).contains("ABI v2"), "{e}");
    let e = build("builtin:nope").await;
    assert!(e.message.contains("echo-json"), "lists what is built in: {e}");
    let e = build(edgegate_guests::UNKNOWN_IMPORT).await;
    assert!(crate::error::error_chain(&e).contains("teleport"), "names the import: {e}");
}
