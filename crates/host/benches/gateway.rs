//! One request through the whole gateway (`Gateway::handle`), no client socket: route, read the
//! body, run the worker in a fresh instance, and for `auth-router` proxy to a real upstream on
//! loopback and stream its answer back. Everything runs on one thread (a current-thread tokio
//! runtime drives the gateway and the upstream), so the time per iteration is the CPU the
//! request costs there, the upstream's small share and the loopback round trip included.
//!
//! * `gateway/respond`: GET a `respond` route, answered by the gateway itself: routing, ids,
//!   metrics and the access path, no worker (the lab's `/__ping` without its socket).
//! * `gateway/echo-json`: POST `{}` to echo-json (no upstream): the HTTP-side baseline.
//! * `gateway/auth-router-HS256`: a GET with an HS256 bearer token, verified, routed on `aud`,
//!   forwarded to the upstream, its `{"ok":true}` collected.
//! * `gateway/auth-router-RS256`: the same with an RS256 token.
//! * `gateway/forward-only`: the hostile test guest's `/forward`, which forwards at once, to the
//!   same upstream: the proxy hop alone. `auth-router-HS256 − forward-only` is what edge auth
//!   costs inside a proxied request.
//!
//! * `gateway/rate-local`, `gateway/rate-shared`: `respond` behind a rate limit keyed by the
//!   client's address, at a rate never reached: counted in the process, or in a real
//!   `redis-server` on loopback (skipped, with a notice, when it is not installed). Each minus
//!   `respond` is a decision's cost; the shared one includes the round trip to Redis and
//!   Redis's own work, as this one thread waits for it.
//! * `gateway/rate-shared-refused`: the same for a key Redis has refused for the next hour:
//!   the 429 comes from the refusal the gateway remembers, without asking Redis.
//!
//! * `gateway/kv-lookup`: GET a 256 B value from an in-memory namespace (the db-lookup path).
//! * `gateway/metrics/…`: echo-json and kv-lookup again after the Prometheus recorder is
//!   installed, as `serve` does: `metrics/X ÷ X` is what the recorder costs a request (the
//!   request path's own histograms and gauges record in both).
//!
//! * `gateway/logged/…`: the same after a subscriber at the default level (`info`) is
//!   installed as `serve` installs it: `logged/X ÷ metrics/X` is what the access line costs a
//!   request, its formatting and its hand-off to the log queue.
//!
//! Run: `cargo bench -p edgegate-host --bench gateway`

use std::path::PathBuf;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use edgegate_host::config::Loaded;
use edgegate_host::{ConnInfo, Gateway};
use edgegate_testkit::redis::RedisServer;
use edgegate_testkit::{Signer, now};
use http_body_util::{BodyExt, Full};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;

/// `/rate/local`, `/rate/shared` and `/rate/refused`: `respond` behind a policy counted in the
/// process, in `redis` (at a rate never reached), and in `redis` spent for the next hour.
fn rate_limited(redis: Option<&RedisServer>) -> String {
    let url = redis.map_or("redis://127.0.0.1:1".into(), |r| r.url());
    let shared = |requests: u32, per: &str| {
        format!(
            "requests = {requests}\nper = \"{per}\"\nscope = \"shared\"\nurl = \"{url}\"\n\
             timeout = \"1s\"\non_error = \"fail_closed\""
        )
    };
    [
        ("local", "/rate/local", "requests = 100000000".to_owned()),
        ("shared", "/rate/shared", shared(100_000_000, "1s")),
        ("spent", "/rate/refused", shared(1, "1h")),
    ]
    .map(|(name, path, policy)| {
        format!(
            "[rate_limits.{name}]\n{policy}\n\n[[routes]]\npath = \"{path}\"\n\
             respond = {{ body = \"pong\" }}\nrate_limits = [\"{name}\"]\n\n"
        )
    })
    .concat()
}

async fn upstream() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_request| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                        Bytes::from_static(br#"{"ok":true}"#),
                    )))
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    addr
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let redis = RedisServer::start("gateway/rate-shared");
    let (hs, rs) = (Signer::hs256(), Signer::rs256());
    let gateway = rt.block_on(async {
        let addr = upstream().await;
        let text = format!(
            r#"
            [runtime]
            cache = false

            [workers.echo]
            module = "builtin:echo-json"
            # Not testing the budget: stolen time on a VM is now and then charged to a request.
            limits = {{ cpu = "1s" }}

            [workers.auth]
            module = "builtin:auth-router"
            upstreams = ["service-a"]
            limits = {{ cpu = "1s" }}
            config = {{ claim_headers = "sub:x-jwt-sub,scope:x-jwt-scope" }}

            [workers.auth.jwt]
            [[workers.auth.jwt.keys]]
            jwk = '{hs}'
            [[workers.auth.jwt.keys]]
            jwk = '{rs}'

            [workers.forwarder]
            module = "{hostile}"
            upstreams = ["nowhere"]
            limits = {{ cpu = "1s" }}

            [kv.bench]
            backend = "memory"
            seed = "builtin:demo-kv"

            [workers.kv]
            module = "builtin:kv-lookup"
            kv = ["bench"]
            limits = {{ cpu = "1s" }}
            config = {{ namespace = "bench" }}

            [[routes]]
            path = "/echo"
            worker = "echo"

            [[routes]]
            prefix = "/kv/"
            worker = "kv"

            [[routes]]
            path = "/h/forward"
            worker = "forwarder"

            [[routes]]
            path = "/ping"
            respond = {{ body = "pong" }}

            [[routes]]
            path = "/split/header"
            [routes.split]
            targets = [{{ name = "a", worker = "echo", weight = 1 }}, {{ name = "b", worker = "echo", weight = 1 }}]
            sticky = {{ header = "x-user" }}

            [[routes]]
            path = "/split/claim"
            [routes.split]
            targets = [{{ name = "a", worker = "echo", weight = 1 }}, {{ name = "b", worker = "echo", weight = 1 }}]
            jwt = "auth"
            sticky = {{ claim = "sub" }}

            {rate_limited}

            [[routes]]
            prefix = "/"
            worker = "auth"

            [upstreams.service-a]
            url = "http://{addr}"

            [upstreams.nowhere]
            url = "http://{addr}"
            "#,
            hostile = edgegate_guests::HOSTILE,
            rate_limited = rate_limited(redis.as_ref()),
            hs = hs.jwk(Some("hs")),
            rs = rs.jwk(Some("rs")),
        );
        let loaded = Loaded::from_text(&text, "bench.toml", PathBuf::new()).unwrap();
        Gateway::build(&loaded, edgegate_guests::BUILTIN).await.unwrap()
    });
    let conn = ConnInfo { peer: "127.0.0.1:50000".parse().unwrap(), tls: None };
    let claims =
        serde_json::json!({"sub": "ada", "aud": "service-a", "scope": "read", "exp": now() + 3600});
    let run = |path: &str, token: Option<&str>, body: &'static [u8]| {
        let mut request = http::Request::builder().uri(path).header("host", "api.example");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if !body.is_empty() {
            request = request.method("POST");
        }
        let request = request.body(Full::new(Bytes::from_static(body))).unwrap();
        rt.block_on(async {
            let response = gateway.handle(request, conn).await;
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status.as_u16(), body)
        })
    };
    let (hs_token, rs_token) = (hs.token(Some("hs"), &claims), rs.token(Some("rs"), &claims));
    assert_eq!(run("/echo", None, b"{}").0, 200);
    assert_eq!(run("/orders", Some(&hs_token), b""), (200, Bytes::from_static(br#"{"ok":true}"#)));
    assert_eq!(run("/orders", Some(&rs_token), b"").0, 200);
    assert_eq!(run("/h/forward", Some("not-checked"), b"").0, 200);
    assert_eq!(run("/split/header", None, b"{}").0, 200);
    assert_eq!(run("/split/claim", Some(&rs_token), b"{}").0, 200);
    let (status, value) = run("/kv/user:7", None, b"");
    assert_eq!((status, value.len()), (200, 256));

    assert_eq!(run("/ping", None, b""), (200, Bytes::from_static(b"pong")));

    let mut group = c.benchmark_group("gateway");
    group.bench_function("respond", |b| b.iter(|| run("/ping", None, b"")));
    assert_eq!(run("/rate/local", None, b"").0, 200);
    group.bench_function("rate-local", |b| b.iter(|| run("/rate/local", None, b"")));
    if redis.is_some() {
        assert_eq!(run("/rate/shared", None, b"").0, 200);
        group.bench_function("rate-shared", |b| b.iter(|| run("/rate/shared", None, b"")));
        assert_eq!(run("/rate/refused", None, b"").0, 200);
        assert_eq!(run("/rate/refused", None, b"").0, 429);
        group.bench_function("rate-shared-refused", |b| b.iter(|| run("/rate/refused", None, b"")));
    }
    group.bench_function("echo-json", |b| b.iter(|| run("/echo", None, b"{}")));
    group.bench_function("auth-router-HS256", |b| b.iter(|| run("/orders", Some(&hs_token), b"")));
    group.bench_function("auth-router-RS256", |b| b.iter(|| run("/orders", Some(&rs_token), b"")));
    group
        .bench_function("forward-only", |b| b.iter(|| run("/h/forward", Some("not-checked"), b"")));
    group.bench_function("kv-lookup", |b| b.iter(|| run("/kv/user:7", None, b"")));
    // A split's choice: at random (no key), and on a claim of a token the host verifies.
    group.bench_function("split-random", |b| b.iter(|| run("/split/header", None, b"{}")));
    for (name, token) in
        [("split-sticky-claim-HS256", &hs_token), ("split-sticky-claim-RS256", &rs_token)]
    {
        group.bench_function(name, |b| b.iter(|| run("/split/claim", Some(token), b"{}")));
    }
    {
        let _runtime = rt.enter();
        edgegate_host::observe::metrics::install().unwrap();
    }
    group.bench_function("metrics/echo-json", |b| b.iter(|| run("/echo", None, b"{}")));
    group.bench_function("metrics/kv-lookup", |b| b.iter(|| run("/kv/user:7", None, b"")));
    // The default log level as `serve` sets it up: every request's access line written
    // straight into the log queue (whose thread writes to nothing here), any other event
    // through the subscriber; the spans, which `serve` gives no layer without an exporter, off.
    let (writer, _flushed) = edgegate_host::observe::log_writer::non_blocking(std::io::sink())
        .expect("the default queue");
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(writer.clone())
        .with_ansi(false)
        .with_filter(EnvFilter::new(format!("info,{}=off", edgegate_runtime::SPAN_TARGET)));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(logs))
        .expect("the benchmark's only subscriber");
    let levels = vec![tracing::Level::INFO, tracing::Level::WARN, tracing::Level::ERROR];
    edgegate_host::observe::access_line::install(writer, false, levels);
    group.bench_function("logged/echo-json", |b| b.iter(|| run("/echo", None, b"{}")));
    group.bench_function("logged/kv-lookup", |b| b.iter(|| run("/kv/user:7", None, b"")));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
