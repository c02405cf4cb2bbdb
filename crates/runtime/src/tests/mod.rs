//! The runtime against real guests: the demo worker, the hostile test programs, and broken
//! modules. No sockets; the end-to-end suite drives the same guests through the binary.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use edgegate_guests as guests;

use crate::*;

mod auth;
mod component;
mod fiberless;
mod image;
mod kv;
mod resident;

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let config = RuntimeConfig { max_instances: 32, ..RuntimeConfig::default() };
        Runtime::new(config, None).unwrap()
    })
}

fn load_with(path: &str, limits: Limits, config: &[(&str, &str)]) -> Result<Worker, LoadError> {
    load_bytes(&std::fs::read(path).unwrap(), limits, config)
}

fn load_bytes(wasm: &[u8], limits: Limits, config: &[(&str, &str)]) -> Result<Worker, LoadError> {
    load_into(runtime(), wasm, limits, config)
}

fn load_into(
    runtime: &Runtime,
    wasm: &[u8],
    limits: Limits,
    config: &[(&str, &str)],
) -> Result<Worker, LoadError> {
    runtime.load(spec(wasm, limits, config))
}

fn spec<'a>(wasm: &[u8], limits: Limits, config: &[(&str, &str)]) -> WorkerSpec<'a> {
    WorkerSpec {
        name: "test",
        source: crate::Source::Bytes(bytes::Bytes::copy_from_slice(wasm)),
        native_code: false,
        limits,
        config: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        keys: None,
        kv: Vec::new(),
        fetcher: None,
        image: None,
    }
}

fn hostile() -> Worker {
    hostile_with(Limits::default())
}

fn hostile_with(limits: Limits) -> Worker {
    load_with(guests::HOSTILE, limits, &[("greeting", "hello from config")]).unwrap()
}

fn get(path: &str) -> GuestRequest {
    GuestRequest { uri: path.parse().unwrap(), ..GuestRequest::default() }
}

async fn response(worker: &Worker, request: GuestRequest) -> http::Response<bytes::Bytes> {
    match worker.handle(request, RequestId(7)).await {
        Ok(GuestOutcome::Response(r)) => r,
        other => panic!("expected a response, got {other:?}"),
    }
}

async fn failure(worker: &Worker, path: &str) -> ExecErrorKind {
    match worker.handle(get(path), RequestId(7)).await {
        Err(e) => e.kind(),
        Ok(outcome) => panic!("{path}: expected a failure, got {outcome:?}"),
    }
}

/// After any failure, the same worker must serve the next request normally.
async fn still_serves(worker: &Worker) {
    let r = response(worker, get("/ok")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.body(), "ok");
}

#[tokio::test]
async fn echo_json_round_trips() {
    let worker = runtime()
        .load(WorkerSpec {
            name: "echo-json",
            source: crate::Source::Bytes(bytes::Bytes::copy_from_slice(guests::ECHO_JSON)),
            native_code: false,
            limits: Limits::default(),
            config: BTreeMap::new(),
            keys: None,
            kv: Vec::new(),
            fetcher: None,
            image: None,
        })
        .unwrap();
    let mut request = get("/echo");
    request.method = http::Method::POST;
    request.body = r#"{ "z": [1, {"y": null}], "a": "b" }"#.into();
    let r = response(&worker, request).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(r.body(), r#"{"z":[1,{"y":null}],"a":"b"}"#);

    let mut bad = get("/echo");
    bad.method = http::Method::POST;
    bad.body = "{nope".into();
    assert_eq!(response(&worker, bad).await.status(), 400);
}

#[tokio::test]
async fn the_guest_sees_the_whole_request() {
    // `/config` echoes a configured value; the query parameter proves the target arrived.
    let worker = hostile();
    let r = response(&worker, get("/config?key=greeting")).await;
    assert_eq!(r.body(), "hello from config");
    assert_eq!(response(&worker, get("/config?key=missing")).await.status(), 404);
}

/// An idle runtime's ticker parks; the next request wakes it, so a spinning guest is still
/// stopped by its budget, and the ticker parks again once the runtime is idle.
#[test]
fn the_idle_ticker_parks_and_the_next_request_wakes_it() {
    // Its own runtime: the shared one is kept busy by the tests running alongside.
    let config = RuntimeConfig { max_instances: 2, ..RuntimeConfig::default() };
    let runtime = Runtime::new(config, None).unwrap();
    let hostile = std::fs::read(guests::HOSTILE).unwrap();
    let worker = load_into(&runtime, &hostile, Limits::default(), &[]).unwrap();
    let parks = || {
        (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            runtime.activity().parked()
        })
    };
    assert!(parks(), "the ticker did not park within 2 s of idleness");

    // Were the ticker left parked, the loop would never be interrupted: it spins on a thread of
    // its own, this test gives up on it after 10 s, and the tokio runtime is shut down without
    // waiting for it (a failure, not a hang).
    let tokio =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let spinning = tokio.spawn({
        let worker = worker.clone();
        async move { failure(&worker, "/loop").await }
    });
    let outcome = tokio.block_on(async {
        let stopped = tokio::time::timeout(Duration::from_secs(10), spinning).await.ok()?;
        Some((stopped.unwrap(), response(&worker, get("/ok")).await.status().as_u16()))
    });
    tokio.shutdown_background();
    let (stopped, ok) = outcome.expect("a parked ticker left a spinning guest running");
    assert_eq!((stopped, ok), (ExecErrorKind::CpuBudgetExceeded, 200));
    assert!(parks(), "the ticker did not park again");
}

#[tokio::test]
async fn infinite_loop_is_stopped_by_the_cpu_budget() {
    let worker = hostile();
    assert_eq!(failure(&worker, "/loop").await, ExecErrorKind::CpuBudgetExceeded);
    still_serves(&worker).await;
}

#[tokio::test]
async fn wall_clock_deadline_stops_a_guest_with_cpu_to_spare() {
    let worker = hostile_with(Limits {
        cpu: Duration::from_secs(30),
        deadline: Duration::from_millis(50),
        ..Limits::default()
    });
    assert_eq!(failure(&worker, "/loop").await, ExecErrorKind::DeadlineExceeded);
    still_serves(&worker).await;
}

#[tokio::test]
async fn memory_bombs_are_out_of_memory() {
    // CPU to spare: on a loaded machine, 2 MiB of first-touch page faults can outlast the
    // default 2 ms budget, and the memory limit is what this test is about.
    let worker = hostile_with(Limits { cpu: Duration::from_secs(10), ..Limits::default() });
    for path in ["/grow", "/alloc", "/bomb"] {
        assert_eq!(failure(&worker, path).await, ExecErrorKind::OutOfMemory, "{path}");
        still_serves(&worker).await;
    }
}

#[tokio::test]
async fn a_larger_memory_limit_lets_the_big_allocation_through() {
    // The same guest, with room for its 64 MiB (and CPU time to fill them): proves the limit,
    // not the guest, said no.
    let worker =
        hostile_with(Limits { memory: 80 << 20, cpu: Duration::from_secs(5), ..Limits::default() });
    assert_eq!(response(&worker, get("/alloc")).await.status(), 200);
}

#[tokio::test]
async fn unbounded_recursion_is_a_stack_overflow_trap() {
    let worker = hostile();
    assert_eq!(failure(&worker, "/recurse").await, ExecErrorKind::StackOverflow);
    still_serves(&worker).await;
}

#[tokio::test]
async fn traps_and_panics_are_traps() {
    let worker = hostile();
    assert_eq!(failure(&worker, "/trap").await, ExecErrorKind::Trap);
    assert_eq!(failure(&worker, "/panic").await, ExecErrorKind::Trap);
    still_serves(&worker).await;
}

#[tokio::test]
async fn hostcall_flood_is_stopped_by_its_budget() {
    let worker = hostile();
    assert_eq!(failure(&worker, "/hostcalls").await, ExecErrorKind::HostcallBudgetExceeded);
    still_serves(&worker).await;
}

#[tokio::test]
async fn every_request_gets_a_fresh_instance() {
    // Linear memory (a Rust static) and a Wasm global (the WAT guest): request B must never see
    // what request A wrote.
    let rust = hostile();
    let wat = load_with(guests::LEAK, Limits::default(), &[]).unwrap();
    for _ in 0..3 {
        assert_eq!(response(&rust, get("/leak")).await.body(), "00".repeat(16).as_bytes());
        assert_eq!(response(&wat, get("/")).await.body(), &[0u8; 16][..]);
    }
}

#[tokio::test]
async fn response_limits_and_validation() {
    let worker = hostile_with(Limits { response_body: 1000, ..Limits::default() });
    assert_eq!(response(&worker, get("/bytes?n=1000")).await.body().len(), 1000);
    assert_eq!(failure(&worker, "/bytes?n=1001").await, ExecErrorKind::ResponseTooLarge);
    assert_eq!(failure(&worker, "/bad-header").await, ExecErrorKind::InvalidResponse);
    assert_eq!(failure(&worker, "/unavailable").await, ExecErrorKind::WorkerUnavailable);
}

#[tokio::test]
async fn a_worker_answers_200_to_599_and_no_connection_or_framing_header() {
    let worker = hostile();
    for code in [100, 101, 103, 199, 600, 999, 0] {
        let path = format!("/status?code={code}");
        assert_eq!(failure(&worker, &path).await, ExecErrorKind::InvalidResponse, "{code}");
    }
    for code in [200, 204, 304, 418, 599] {
        let path = format!("/status?code={code}");
        assert_eq!(response(&worker, get(&path)).await.status(), code);
    }
    for case in [
        "crlf",
        "nul",
        "connection",
        "transfer-encoding",
        "upgrade",
        "keep-alive",
        "content-length",
    ] {
        let path = format!("/status?set={case}");
        assert_eq!(failure(&worker, &path).await, ExecErrorKind::InvalidResponse, "{case}");
        let path = format!("/pass?set={case}");
        assert_eq!(failure(&worker, &path).await, ExecErrorKind::InvalidResponse, "{case}");
    }
    let path = "/pass?set=content-length-ok";
    assert_eq!(failure(&worker, path).await, ExecErrorKind::InvalidResponse, "forwarded: never");
    let exact = response(&worker, get("/status?set=content-length-ok")).await;
    assert_eq!((exact.status().as_u16(), exact.body().as_ref()), (200, &b"status"[..]));
    assert!(exact.headers().get("content-length").is_none(), "the host sends its own");
}

#[tokio::test]
async fn forward_directives_are_decoded() {
    let worker = hostile();
    match worker.handle(get("/forward"), RequestId(1)).await.unwrap() {
        GuestOutcome::Forward(f) => {
            assert_eq!(f.upstream, "nowhere");
            assert_eq!(f.request.uri.path(), "/forward", "the request comes back for proxying");
            assert_eq!(
                f.edits,
                [HeaderEdit::Set(
                    http::HeaderName::from_static("x-from"),
                    http::HeaderValue::from_static("hostile")
                )]
            );
        }
        other => panic!("expected a forward, got {other:?}"),
    }
}

#[tokio::test]
async fn random_bytes_differ() {
    let worker = hostile();
    let a = response(&worker, get("/random")).await;
    let b = response(&worker, get("/random")).await;
    assert_eq!(a.status(), 200);
    assert_eq!(a.body().len(), 32);
    assert_ne!(a.body(), b.body());
}

#[tokio::test]
async fn a_malformed_outcome_is_an_abi_violation() {
    let worker = load_with(guests::BAD_OUTCOME, Limits::default(), &[]).unwrap();
    assert_eq!(failure(&worker, "/").await, ExecErrorKind::AbiViolation);
}

#[test]
fn modules_that_do_not_fit_are_refused_at_load() {
    let load = |path| load_with(path, Limits::default(), &[]).unwrap_err();
    assert!(matches!(load(guests::WRONG_ABI), LoadError::AbiVersion { found: 2, supported: 1 }));
    assert!(matches!(load(guests::NO_ENTRY), LoadError::NoEntryPoint));
    assert!(
        matches!(load(guests::BIG_MEMORY), LoadError::InitialMemory { needed, .. } if needed == 4 << 20)
    );
    let unknown = load(guests::UNKNOWN_IMPORT);
    assert!(matches!(unknown, LoadError::UnknownImport(ref i) if i == "edgegate_v1::teleport"));
    assert!(unknown.to_string().contains("`edgegate_v1::teleport`"), "{unknown}");
    let garbage = runtime().load(WorkerSpec {
        name: "garbage",
        source: crate::Source::Bytes(bytes::Bytes::copy_from_slice(b"\0asm\x01\0\0\0 not really")),
        native_code: false,
        limits: Limits::default(),
        config: BTreeMap::new(),
        keys: None,
        kv: Vec::new(),
        fetcher: None,
        image: None,
    });
    assert!(matches!(garbage, Err(LoadError::Compile(_))));
    let too_big = Limits { memory: 1 << 40, ..Limits::default() };
    assert!(matches!(
        load_with(guests::HOSTILE, too_big, &[]),
        Err(LoadError::MemoryLimitTooLarge { .. })
    ));
}

#[test]
fn the_wrong_abi_message_says_what_to_do() {
    let message = load_with(guests::WRONG_ABI, Limits::default(), &[]).unwrap_err().to_string();
    assert!(message.contains("v2") && message.contains("v1"), "{message}");
}

#[test]
fn module_cache_hits_and_rejects_bad_entries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ModuleCache::open(dir.path().join("modules")).unwrap();
    let engine = &runtime().resident().loader.engines.core;
    let wasm = guests::ECHO_JSON;

    let (_, first) =
        cache.load_or_compile(engine, wasm, &crate::code::module_cache::sha256(wasm)).unwrap();
    assert_eq!(first, CacheOutcome::Miss);
    let (_, second) =
        cache.load_or_compile(engine, wasm, &crate::code::module_cache::sha256(wasm)).unwrap();
    assert_eq!(second, CacheOutcome::Hit);

    let wasm_hash = crate::code::module_cache::sha256(wasm);
    let entry = cache.entry_path(engine, &wasm_hash);
    let mut bytes = std::fs::read(&entry).unwrap();

    // A flipped payload byte fails the checksum and is recompiled, then served from cache.
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let (_, outcome) =
        cache.load_or_compile(engine, wasm, &crate::code::module_cache::sha256(wasm)).unwrap();
    assert!(
        matches!(outcome, CacheOutcome::Rejected(ref r) if r.contains("checksum")),
        "{outcome:?}"
    );
    assert_eq!(
        cache.load_or_compile(engine, wasm, &crate::code::module_cache::sha256(wasm)).unwrap().1,
        CacheOutcome::Hit
    );

    // An entry for another module under this module's name is refused.
    let mut foreign = std::fs::read(&entry).unwrap();
    foreign[16..48].copy_from_slice(&[0; 32]);
    std::fs::write(&entry, &foreign).unwrap();
    let (_, outcome) =
        cache.load_or_compile(engine, wasm, &crate::code::module_cache::sha256(wasm)).unwrap();
    assert!(matches!(outcome, CacheOutcome::Rejected(ref r) if r.contains("another module")));

    // Garbage is not an entry.
    std::fs::write(&entry, b"garbage").unwrap();
    assert!(matches!(
        cache.load_or_compile(engine, wasm, &crate::code::module_cache::sha256(wasm)).unwrap().1,
        CacheOutcome::Rejected(_)
    ));
}

#[test]
fn an_entry_from_another_engine_configuration_is_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ModuleCache::open(dir.path()).unwrap();
    let ours = &runtime().resident().loader.engines.core;
    let mut config = wasmtime::Config::new();
    config.cranelift_opt_level(wasmtime::OptLevel::None);
    let theirs = wasmtime::Engine::new(&config).unwrap();
    let wasm = guests::ECHO_JSON;
    let hash = crate::code::module_cache::sha256(wasm);

    // Other settings, other name: a stale entry is not even opened ...
    assert_ne!(cache.entry_path(ours, &hash), cache.entry_path(&theirs, &hash));
    // ... and one planted under our name, checksum and all, is refused by Wasmtime.
    assert_eq!(
        cache.load_or_compile(&theirs, wasm, &crate::code::module_cache::sha256(wasm)).unwrap().1,
        CacheOutcome::Miss
    );
    std::fs::copy(cache.entry_path(&theirs, &hash), cache.entry_path(ours, &hash)).unwrap();
    let (_, outcome) =
        cache.load_or_compile(ours, wasm, &crate::code::module_cache::sha256(wasm)).unwrap();
    assert!(
        matches!(outcome, CacheOutcome::Rejected(ref r) if r.contains("wasmtime")),
        "{outcome:?}"
    );
    assert_eq!(
        cache.load_or_compile(ours, wasm, &crate::code::module_cache::sha256(wasm)).unwrap().1,
        CacheOutcome::Hit
    );
}

#[tokio::test]
async fn a_precompiled_module_loads_as_it_is_and_serves() {
    let cwasm = runtime().precompile(&std::fs::read(guests::HOSTILE).unwrap()).unwrap();
    let spec = WorkerSpec { native_code: true, ..spec(&cwasm, Limits::default(), &[]) };
    let worker = runtime().prepare(spec, None).await.unwrap();
    assert_eq!(worker.checked(), &crate::Checked::Loaded(CacheOutcome::Precompiled));
    still_serves(&worker).await;
}

/// Where only Wasm is taken (the admin API, a registry), a `.cwasm` is refused before it is
/// deserialized, and so is anything that is not binary Wasm (WAT text too).
#[tokio::test]
async fn only_binary_wasm_is_taken_where_native_code_is_not() {
    let cwasm = runtime().precompile(&std::fs::read(guests::HOSTILE).unwrap()).unwrap();
    for (bytes, native) in [
        (&cwasm[..], true),
        (&b"(module (memory (export \"memory\") 1))"[..], false),
        (&b"\0asm\x02\0\0\0"[..], false),
    ] {
        let error = runtime().prepare(spec(bytes, Limits::default(), &[]), None).await;
        let error = error.expect_err("refused");
        assert!(matches!(error, LoadError::NotWasm { native: n } if n == native), "{error:?}");
    }
    let error = load_bytes(&cwasm, Limits::default(), &[]).unwrap_err();
    assert!(error.to_string().contains("outside the Wasm sandbox"), "{error}");
}

#[test]
fn a_precompiled_module_from_other_engine_settings_is_refused_with_a_message() {
    // Wasmtime's defaults: no epoch interruption, unlike the gateway's engine.
    let theirs = wasmtime::Engine::new(&wasmtime::Config::new()).unwrap();
    let cwasm = theirs.precompile_module(&std::fs::read(guests::HOSTILE).unwrap()).unwrap();
    let spec = WorkerSpec { native_code: true, ..spec(&cwasm, Limits::default(), &[]) };
    let error = runtime().load(spec).unwrap_err();
    assert!(matches!(error, LoadError::Precompiled(_)), "{error:?}");
    assert!(error.to_string().contains("edgegate compile"), "{error}");
}
