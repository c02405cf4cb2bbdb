//! A standard `wasi:http/proxy` component (crates/guests/programs/http-component) as a worker:
//! it serves, and its memory, CPU, deadline and host call limits stop it the way they stop a
//! module, with the same error kinds; a component with another import is refused by name.

use std::sync::Arc;

use bytes::Bytes;

use super::*;

fn component_with(limits: Limits, fetcher: Option<Arc<dyn Fetcher>>) -> Worker {
    let wasm = std::fs::read(guests::HTTP_COMPONENT).unwrap();
    runtime()
        .load(WorkerSpec {
            name: "component",
            source: crate::Source::Bytes(bytes::Bytes::copy_from_slice(&wasm)),
            native_code: false,
            limits,
            config: BTreeMap::new(),
            keys: None,
            kv: Vec::new(),
            fetcher,
            image: None,
        })
        .unwrap()
}

fn component() -> Worker {
    // CPU to spare for instantiating and first-touch page faults on a loaded machine; the
    // CPU budget has its own test.
    component_with(Limits { cpu: Duration::from_millis(200), ..Limits::default() }, None)
}

fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> GuestRequest {
    let mut map = http::HeaderMap::new();
    map.insert("host", "api.example".parse().unwrap());
    for (name, value) in headers {
        map.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    GuestRequest {
        method: method.parse().unwrap(),
        uri: path.parse().unwrap(),
        headers: map,
        body: Bytes::copy_from_slice(body.as_bytes()),
        tls: false,
    }
}

#[tokio::test]
async fn a_component_is_detected_and_says_so() {
    let worker = component();
    let info = worker.module_info();
    assert_eq!(info.abi, Abi::HttpComponent);
    assert!(info.imports.iter().any(|i| i.starts_with("wasi:http/types@0.2")), "{info:?}");
    assert!(info.initial_memory > 0 && info.initial_memory <= Limits::DEFAULT_MEMORY, "{info:?}");
    assert_eq!(hostile().module_info().abi, Abi::Core);
}

#[tokio::test]
async fn a_component_serves_get_and_post_with_headers_a_chunked_body_and_statuses() {
    let worker = component();
    let hello = response(&worker, request("GET", "/hello", &[], "")).await;
    assert_eq!(hello.status(), 200);
    assert_eq!(hello.headers()["x-kind"], "component");
    assert_eq!(hello.body(), "hello from a component");

    // Written back in 3-byte writes: the body is what all of them add up to.
    let body = "a body longer than one write, in many pieces";
    let echoed =
        response(&worker, request("POST", "/echo", &[("content-type", "text/x-test")], body)).await;
    assert_eq!((echoed.status().as_u16(), echoed.body().as_ref()), (200, body.as_bytes()));
    assert_eq!(echoed.headers()["content-type"], "text/x-test");

    let seen = response(&worker, request("PUT", "/headers?q=1", &[("x-one", "1")], "")).await;
    let text = String::from_utf8_lossy(seen.body()).into_owned();
    assert!(text.starts_with("PUT /headers?q=1\n"), "{text}");
    assert!(text.contains("x-one: 1\n"), "{text}");

    for status in [201, 404, 503] {
        let answer = response(&worker, request("GET", &format!("/status/{status}"), &[], "")).await;
        assert_eq!(answer.status().as_u16(), status);
    }
}

#[tokio::test]
async fn a_component_status_outside_200_to_599_is_an_invalid_response() {
    let worker = component();
    let outcome = worker.handle(request("GET", "/status/101", &[], ""), RequestId(1)).await;
    assert_eq!(outcome.unwrap_err().kind(), ExecErrorKind::InvalidResponse);
}

async fn component_failure(worker: &Worker, path: &str) -> ExecErrorKind {
    match worker.handle(request("GET", path, &[], ""), RequestId(7)).await {
        Err(e) => e.kind(),
        Ok(outcome) => panic!("{path}: expected a failure, got {outcome:?}"),
    }
}

async fn component_still_serves(worker: &Worker) {
    let hello = response(worker, request("GET", "/hello", &[], "")).await;
    assert_eq!(hello.body(), "hello from a component");
}

#[tokio::test]
async fn a_component_s_limits_stop_it_as_a_module_s_do() {
    // A deadline far past the CPU budget, so a busy machine cannot reach it first.
    let worker = component_with(
        Limits {
            cpu: Duration::from_millis(50),
            deadline: Duration::from_secs(10),
            hostcalls: 1000,
            ..Limits::default()
        },
        None,
    );
    assert_eq!(component_failure(&worker, "/spin").await, ExecErrorKind::CpuBudgetExceeded);
    component_still_serves(&worker).await;
    assert_eq!(component_failure(&worker, "/alloc/8").await, ExecErrorKind::OutOfMemory);
    component_still_serves(&worker).await;
    assert_eq!(
        component_failure(&worker, "/hostcalls").await,
        ExecErrorKind::HostcallBudgetExceeded
    );
    component_still_serves(&worker).await;
    assert_eq!(component_failure(&worker, "/panic").await, ExecErrorKind::Trap);
    component_still_serves(&worker).await;

    // Waiting on a pollable costs no CPU: the deadline ends it.
    let waiting = component_with(
        Limits {
            cpu: Duration::from_millis(200),
            deadline: Duration::from_millis(300),
            ..Limits::default()
        },
        None,
    );
    assert_eq!(component_failure(&waiting, "/sleep").await, ExecErrorKind::DeadlineExceeded);
    component_still_serves(&waiting).await;

    // The same paths within larger limits: the limits, not the guest, said no.
    let roomy = component_with(
        Limits {
            memory: 16 << 20,
            cpu: Duration::from_secs(5),
            hostcalls: 1_000_000,
            ..Limits::default()
        },
        None,
    );
    for path in ["/alloc/8", "/hostcalls"] {
        let answer = response(&roomy, request("GET", path, &[], "")).await;
        assert_eq!(answer.status(), 200, "{path}");
    }
}

#[tokio::test]
async fn a_component_response_over_its_limit_is_response_too_large() {
    let worker = component_with(
        Limits { response_body: 10, cpu: Duration::from_millis(200), ..Limits::default() },
        None,
    );
    let outcome = worker.handle(request("POST", "/echo", &[], "eleven bytes"), RequestId(1)).await;
    assert_eq!(outcome.unwrap_err().kind(), ExecErrorKind::ResponseTooLarge);
    let fits = response(&worker, request("POST", "/echo", &[], "ten bytes!")).await;
    assert_eq!(fits.body(), "ten bytes!");
}

#[test]
fn a_component_importing_more_than_the_proxy_world_is_refused_by_name() {
    let wasm = std::fs::read(guests::COMPONENT_FILESYSTEM).unwrap();
    let error = load_bytes(&wasm, Limits::default(), &[]).unwrap_err();
    assert!(matches!(error, LoadError::UnknownComponentImport(_)), "{error:?}");
    assert!(error.to_string().contains("`wasi:filesystem/types@0.2.6`"), "{error}");
}

#[test]
fn a_component_starting_with_more_memory_than_its_limit_is_refused() {
    let wasm = std::fs::read(guests::HTTP_COMPONENT).unwrap();
    let error =
        load_bytes(&wasm, Limits { memory: 64 << 10, ..Limits::default() }, &[]).unwrap_err();
    assert!(matches!(error, LoadError::InitialMemory { .. }), "{error:?}");
}

/// A fetcher that answers for `allowed.test` and refuses everything else, counting.
#[derive(Debug, Default)]
struct Answering {
    started: std::sync::atomic::AtomicU32,
}

impl Fetcher for Answering {
    fn start(
        &self,
        request: http::Request<Bytes>,
        _max_body: u64,
    ) -> Result<FetchFuture, FetchError> {
        if request.uri().host() != Some("allowed.test") {
            return Err(FetchError::NotAllowed(request.uri().to_string()));
        }
        self.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body = format!("fetched {}", request.uri());
        Ok(Box::pin(async move { Ok(http::Response::new(Bytes::from(body))) }))
    }
}

#[tokio::test]
async fn a_component_s_outbound_requests_are_the_worker_s_fetches() {
    let fetcher = Arc::new(Answering::default());
    let limits = Limits { subrequests: 3, cpu: Duration::from_millis(200), ..Limits::default() };
    let worker = component_with(limits, Some(fetcher.clone()));
    let get = |path: &str| request("GET", path, &[], "");

    let ok = response(&worker, get("/fetch?http://allowed.test/x")).await;
    assert_eq!(ok.body(), "200 fetched http://allowed.test/x");
    let denied = response(&worker, get("/fetch?http://elsewhere.test/x")).await;
    assert_eq!(denied.status(), 502);
    assert_eq!(denied.body(), "ErrorCode::HttpRequestDenied");
    // Three allowed, the fourth past the cap: never started.
    let before = fetcher.started.load(std::sync::atomic::Ordering::SeqCst);
    let many = response(&worker, get("/fetch-many/5?http://allowed.test/y")).await;
    assert_eq!(many.body(), "3 Some(ErrorCode::ConnectionLimitReached)");
    assert_eq!(fetcher.started.load(std::sync::atomic::Ordering::SeqCst) - before, 3);

    let none = component();
    let refused = response(&none, get("/fetch?http://allowed.test/x")).await;
    assert_eq!(refused.body(), "ErrorCode::HttpRequestDenied", "no fetcher: none");
}

/// The std guest for `wasm32-wasip2`, read; `None` when the toolchain lacks the target
/// ([`guests::wasip2_std`] says so).
fn wasip2_std() -> Option<Vec<u8>> {
    guests::wasip2_std().map(|path| std::fs::read(path).unwrap())
}

/// A std guest for `wasm32-wasip2` (the `wasi` crate), as most Rust wasi:http code is built:
/// it imports the cli environment, exit and terminal interfaces and `insecure-seed`, which
/// edgegate links as empty, a trap and none.
#[tokio::test]
async fn a_std_guest_built_for_wasm32_wasip2_loads_and_serves() {
    let Some(wasm) = wasip2_std() else { return };
    let worker =
        load_bytes(&wasm, Limits { cpu: Duration::from_millis(200), ..Limits::default() }, &[])
            .unwrap_or_else(|e| panic!("{e}"));
    let info = worker.module_info();
    assert_eq!(info.abi, Abi::HttpComponent);
    assert!(info.imports.iter().any(|i| i.starts_with("wasi:cli/environment@")), "{info:?}");
    let body = |path: &'static str| {
        let worker = worker.clone();
        async move { response(&worker, request("GET", path, &[], "")).await.body().clone() }
    };
    assert_eq!(body("/env").await, "0 0", "no environment, no arguments");
    assert_eq!(body("/map").await, "2");
    assert_eq!(body("/print").await, "printed");
    assert_eq!(component_failure(&worker, "/exit").await, ExecErrorKind::Trap);
    assert_eq!(body("/map").await, "2", "still serving after the exit");
}

/// What a component can make the host hold or do is bounded and charged to it: header maps
/// count against its memory limit, random bytes are capped a call, the host's work counts
/// against its CPU budget, and each is the worker's failure, not the host's.
#[tokio::test]
async fn what_a_component_makes_the_host_hold_or_do_is_charged_to_it() {
    // CPU for building a hundred maps in a debug build.
    let limits = Limits {
        memory: 8 << 20,
        cpu: Duration::from_secs(1),
        deadline: Duration::from_secs(30),
        hostcalls: 1_000_000,
        ..Limits::default()
    };
    let worker = component_with(limits, None);
    // 900 header maps of 56 KiB each (50 MiB in the host) against an 8 MiB limit.
    assert_eq!(component_failure(&worker, "/fields/900/56").await, ExecErrorKind::OutOfMemory);
    component_still_serves(&worker).await;
    // A few fit beside the component's linear memory.
    let few = response(&worker, request("GET", "/fields/20/56", &[], "")).await;
    assert_eq!((few.status().as_u16(), few.body().as_ref()), (200, &b"20"[..]));
    // A map over its cap, and more random bytes than the cap in one call: wasi-http and WASI
    // fail the host call, which is the guest's fault (a trap), not the host's.
    for path in ["/fields/3/120", "/random/1/1024"] {
        let error = worker.handle(request("GET", path, &[], ""), RequestId(1)).await;
        let error = error.unwrap_err();
        assert_eq!(error.kind(), ExecErrorKind::Trap, "{path}: {error}");
        assert!(error.detail().contains("exceeds limit"), "{path}: {}", error.detail());
    }
    // Within the cap, many times: the host's work is the guest's CPU.
    assert_eq!(
        component_failure(&worker, "/random/100000/64").await,
        ExecErrorKind::CpuBudgetExceeded
    );
    let within = response(&worker, request("GET", "/random/10/64", &[], "")).await;
    assert_eq!(within.body(), "655360");
}

#[tokio::test]
async fn a_component_that_never_finishes_its_body_fails_instead_of_answering_half() {
    let worker = component();
    let error = worker.handle(request("GET", "/unfinished", &[], ""), RequestId(1)).await;
    let error = error.unwrap_err();
    assert_eq!(error.kind(), ExecErrorKind::WorkerFailed, "{error}");
    assert!(error.detail().contains("without finishing"), "{}", error.detail());
    component_still_serves(&worker).await;
}

#[tokio::test]
async fn a_component_fetches_a_granted_upstream_by_the_upstream_scheme() {
    let fetcher = Arc::new(Answering::default());
    let limits = Limits { cpu: Duration::from_millis(200), ..Limits::default() };
    let worker = component_with(limits, Some(fetcher));
    let ok =
        response(&worker, request("GET", "/fetch?upstream://allowed.test/profile", &[], "")).await;
    assert_eq!(ok.body(), "200 fetched upstream://allowed.test/profile");
}

/// `wasi:keyvalue` and `wasi:config/store` from a guest bound with wit-bindgen: buckets are
/// the worker's granted namespaces, shared with every request (and with modules); the
/// worker's `kv_ops` and `kv_value` limits hold; a namespace not granted is an error naming
/// it; config is the worker's table.
#[tokio::test]
async fn a_component_reads_and_writes_its_kv_namespaces_and_reads_its_config() {
    use edgegate_kv::{MemoryStore, Namespace, Store};
    let Some(wasm) = wasip2_std() else { return };
    let shared = Arc::new(MemoryStore::new(8 << 20));
    let namespace =
        |name: &str| Namespace { name: name.into(), store: Store::Memory(shared.clone()) };
    let limits =
        Limits { cpu: Duration::from_millis(500), kv_ops: 12, kv_value: 64, ..Limits::default() };
    let mut spec = super::spec(&wasm, limits, &[("greeting", "hello"), ("region", "eu")]);
    spec.kv = vec![namespace("users")];
    let worker = runtime().load(spec).unwrap_or_else(|e| panic!("{e}"));
    let call = |method: &'static str, path: &'static str, body: &'static str| {
        let worker = worker.clone();
        async move {
            let answer = response(&worker, request(method, path, &[], body)).await;
            (answer.status().as_u16(), String::from_utf8_lossy(answer.body()).into_owned())
        }
    };

    assert_eq!(call("GET", "/kv/users/ada", "").await, (404, "missing".into()));
    assert_eq!(call("PUT", "/kv/users/ada", "lovelace").await.0, 204);
    // Kept: the next request, a fresh instance, reads it; so does the store itself.
    assert_eq!(call("GET", "/kv/users/ada", "").await, (200, "lovelace".into()));
    assert_eq!(shared.get_now(b"ada").as_deref(), Some(&b"lovelace"[..]));
    assert_eq!(call("POST", "/incr/users/visits?5", "").await, (200, "5".into()));
    assert_eq!(call("POST", "/incr/users/visits?2", "").await, (200, "7".into()));
    assert_eq!(call("GET", "/keys/users", "").await, (200, "ada\nvisits".into()));
    let batch = call("POST", "/batch/users", "").await;
    assert_eq!(
        batch,
        (200, r#"[Some(("a", [49])), Some(("b", [50])), None] a exists: false"#.into())
    );
    assert_eq!(call("DELETE", "/kv/users/ada", "").await.0, 204);
    assert_eq!(call("GET", "/kv/users/ada", "").await, (404, "missing".into()));

    let (status, text) = call("GET", "/kv/orders/1", "").await;
    assert_eq!(status, 502);
    assert!(text.contains(r#"no KV namespace \"orders\" is granted"#), "{text}");
    let (status, text) = call("PUT", "/kv/users/big", &*"x".repeat(65).leak()).await;
    assert_eq!(status, 502);
    assert!(text.contains("kv_value"), "{text}");
    // The batch path makes 7 of the 12 operations a request may: each request has its own.
    for _ in 0..3 {
        assert_eq!(call("POST", "/batch/users", "").await.0, 200);
    }

    assert_eq!(call("GET", "/config/greeting", "").await, (200, "hello".into()));
    assert_eq!(call("GET", "/config/missing", "").await, (404, "unset".into()));
    assert_eq!(call("GET", "/config", "").await, (200, "greeting=hello\nregion=eu\n".into()));
}

/// A request's `kv_ops` budget is spent across its calls, batches counting each key.
#[tokio::test]
async fn a_component_s_kv_calls_are_held_to_its_kv_ops_budget() {
    use edgegate_kv::{MemoryStore, Namespace, Store};
    let Some(wasm) = wasip2_std() else { return };
    let store = Store::Memory(Arc::new(MemoryStore::new(1 << 20)));
    // The batch path makes 2 + 3 + 1 + 1 operations: 7.
    let within = Limits { cpu: Duration::from_millis(500), kv_ops: 7, ..Limits::default() };
    let over = Limits { kv_ops: 6, ..within.clone() };
    for (limits, expected) in [(within, 200), (over, 502)] {
        let mut spec = super::spec(&wasm, limits, &[]);
        spec.kv = vec![Namespace { name: "n".into(), store: store.clone() }];
        let worker = runtime().load(spec).unwrap();
        let answer = response(&worker, request("POST", "/batch/n", &[], "")).await;
        let text = String::from_utf8_lossy(answer.body()).into_owned();
        assert_eq!(answer.status().as_u16(), expected, "{text}");
        if expected == 502 {
            assert!(text.contains("kv_ops limit of 6"), "{text}");
        }
    }
}

/// The bytes `/big/N` writes: byte `i` is `i % 251`.
fn big(kib: usize) -> Vec<u8> {
    (0..kib << 10).map(|i| (i % 251) as u8).collect()
}

/// A component's streamed answer, read frame by frame (`pause` after each): its bytes, or the
/// error that cut it; and what the guest used and why it was cut, as its body ended.
async fn read_streamed(
    outcome: GuestOutcome,
    pause: Duration,
) -> (http::StatusCode, Result<Vec<u8>, String>, (crate::Usage, Option<ExecErrorKind>)) {
    let GuestOutcome::Streamed(response, progress) = outcome else {
        panic!("not streamed: {outcome:?}")
    };
    let (status, read) = read_body(response, pause).await;
    // A cut answer's guest is aborted: what it used is still told.
    (status, read, (progress.usage(), progress.cut()))
}

async fn read_body(
    response: http::Response<crate::StreamedBody>,
    pause: Duration,
) -> (http::StatusCode, Result<Vec<u8>, String>) {
    use http_body_util::BodyExt;
    let (head, mut body) = response.into_parts();
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => read.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..])),
            Err(error) => return (head.status, Err(error.to_string())),
        }
        tokio::time::sleep(pause).await;
    }
    (head.status, Ok(read))
}

/// An answer past the buffer streams, whole, to a fast or a slow reader; one within it is
/// buffered as before.
#[tokio::test]
async fn a_component_s_answer_past_the_buffer_streams() {
    let limits = Limits {
        response_body: 2 << 20,
        cpu: Duration::from_millis(500),
        deadline: Duration::from_secs(20),
        hostcalls: 100_000,
        ..Limits::default()
    };
    let worker = component_with(limits, None);
    let small = worker.handle(request("GET", "/big/32", &[], ""), RequestId(1)).await.unwrap();
    let GuestOutcome::Response(small) = small else { panic!("{small:?}") };
    assert_eq!(small.body().as_ref(), big(32), "within the buffer: whole");

    let streamed = worker.handle(request("GET", "/big/1024", &[], ""), RequestId(2)).await;
    let (status, body, (usage, cut)) = read_streamed(streamed.unwrap(), Duration::ZERO).await;
    assert_eq!(status, 200);
    assert!(body.as_deref() == Ok(&big(1024)[..]), "{:?}", body.map(|b| b.len()));
    // What the streaming phase cost is the guest's: its CPU and memory, told at the end.
    assert!(usage.cpu > Duration::ZERO && usage.memory_peak > 1 << 20, "{usage:?}");
    assert!(!usage.instantiate.is_zero(), "{usage:?}");
    assert_eq!(cut, None);

    // A slow reader: a millisecond between frames, and the guest waits for it.
    let slow = worker.handle(request("GET", "/big/512", &[], ""), RequestId(3)).await;
    let (_, body, _) = read_streamed(slow.unwrap(), Duration::from_millis(1)).await;
    assert!(body.as_deref() == Ok(&big(512)[..]), "{:?}", body.map(|b| b.len()));
    component_still_serves(&worker).await;
}

/// Once the head is sent, a limit or a trap can only cut the answer: the body ends in an
/// error, never cleanly, and the instance goes.
#[tokio::test]
async fn a_streamed_answer_that_fails_is_cut_not_ended() {
    let limits = Limits {
        response_body: 512 << 10,
        cpu: Duration::from_millis(500),
        deadline: Duration::from_millis(1500),
        hostcalls: 100_000,
        ..Limits::default()
    };
    let worker = component_with(limits, None);
    for (path, expected, kind) in [
        ("/big/1024", "over 524288 bytes, streamed", ExecErrorKind::ResponseTooLarge),
        ("/big-then-trap/256", "wasm trap", ExecErrorKind::Trap),
    ] {
        let outcome = worker.handle(request("GET", path, &[], ""), RequestId(1)).await;
        let (status, body, (usage, cut)) = read_streamed(outcome.unwrap(), Duration::ZERO).await;
        assert_eq!(status, 200, "{path}");
        let error = body.expect_err(path);
        assert!(error.contains(expected), "{path}: {error}");
        assert_eq!(cut, Some(kind), "{path}: why it was cut is told");
        assert!(usage.cpu > Duration::ZERO, "{path}: a cut guest's CPU is charged: {usage:?}");
    }
    // A reader that stops: the guest waits on it until the deadline, which cuts the answer.
    let stalled = worker.handle(request("GET", "/big/400", &[], ""), RequestId(2)).await;
    let (_, body, (_, cut)) = read_streamed(stalled.unwrap(), Duration::from_millis(400)).await;
    let error = body.expect_err("stalled");
    assert!(error.contains("deadline"), "{error}");
    assert_eq!(cut, Some(ExecErrorKind::DeadlineExceeded));
    component_still_serves(&worker).await;
}

#[tokio::test]
async fn a_component_cannot_read_past_its_memory_nor_what_the_request_before_it_left() {
    let wasm = std::fs::read(guests::HTTP_COMPONENT).unwrap();
    let mut compiled = Vec::new();
    for checks in [crate::BoundsChecks::Explicit, crate::BoundsChecks::GuardPages] {
        // One slot: every request reuses the memory the one before it grew and stained.
        let config = RuntimeConfig {
            max_instances: 1,
            component_bounds_checks: checks,
            ..RuntimeConfig::default()
        };
        let runtime = Runtime::new(config, None).unwrap();
        compiled.push(runtime.precompile(&wasm).unwrap());
        let limits = Limits { cpu: Duration::from_millis(200), ..Limits::default() };
        let worker = runtime.load(spec(&wasm, limits, &[])).unwrap();
        let past_end = worker.handle(request("GET", "/past-end", &[], ""), RequestId(1)).await;
        let error = past_end.expect_err("a read past the end of memory");
        assert_eq!(error.kind(), ExecErrorKind::Trap, "{checks:?}: {error}");
        assert!(format!("{error:#}").contains("out of bounds"), "{checks:?}: {error:#}");
        for _ in 0..3 {
            let stain = response(&worker, request("GET", "/stain", &[], "")).await;
            assert_eq!(stain.body(), "0", "{checks:?}: a grown page held the last request's byte");
        }
        component_still_serves(&worker).await;
    }
    // The setting reaches the compiled code: the two engines make different artifacts.
    assert_ne!(compiled[0], compiled[1]);
}
