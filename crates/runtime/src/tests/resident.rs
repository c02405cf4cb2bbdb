//! The resident set: workers whose code loads on their first request, the least recently
//! used evicted, one load for concurrent first requests, checks recorded in the module cache.

use std::num::NonZeroUsize;
use std::path::Path;

use super::*;

/// A runtime that keeps at most `max` modules' code.
fn runtime_keeping(max: usize, cache: Option<ModuleCache>) -> Runtime {
    let max_resident = NonZeroUsize::new(max).unwrap();
    let config = RuntimeConfig { max_instances: 16, max_resident, ..RuntimeConfig::default() };
    Runtime::new(config, cache).unwrap()
}

/// The hostile guest with a custom section named `tag` appended: other bytes, another
/// digest, the same behaviour.
fn variant(tag: &str) -> Vec<u8> {
    let mut wasm = std::fs::read(guests::HOSTILE).unwrap();
    let name = tag.as_bytes();
    wasm.push(0);
    wasm.push(u8::try_from(1 + name.len()).unwrap());
    wasm.push(u8::try_from(name.len()).unwrap());
    wasm.extend_from_slice(name);
    wasm
}

fn file_spec<'a>(path: &Path) -> WorkerSpec<'a> {
    WorkerSpec { source: Source::File(path.to_owned()), ..spec(&[], Limits::default(), &[]) }
}

#[tokio::test]
async fn the_least_recently_used_module_is_evicted_and_loads_again_on_its_next_request() {
    let runtime = runtime_keeping(2, None);
    let load = |tag| runtime.load(spec(&variant(tag), Limits::default(), &[])).unwrap();
    let (a, b) = (load("a"), load("b"));
    still_serves(&a).await; // a is now the most recently used, b the least.
    let c = load("c");
    assert!(a.is_resident() && !b.is_resident() && c.is_resident());
    let stats = runtime.resident_stats();
    assert_eq!((stats.resident, stats.loads, stats.evictions), (2, 3, 1), "{stats:?}");

    // b's next request loads it again, and a (now the least recently used) makes room.
    still_serves(&b).await;
    assert!(b.is_resident() && !a.is_resident() && c.is_resident());
    let stats = runtime.resident_stats();
    assert_eq!((stats.loads, stats.evictions), (4, 2), "{stats:?}");
    let (outcome, usage) = b.handle_measured(get("/ok"), RequestId(1)).await;
    assert!(outcome.is_ok());
    assert_eq!(usage.load, Duration::ZERO, "resident now: nothing to wait for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_load_the_code_once() {
    let runtime = runtime_keeping(1, None);
    let a = runtime.load(spec(&variant("a"), Limits::default(), &[])).unwrap();
    let _b = runtime.load(spec(&variant("b"), Limits::default(), &[])).unwrap();
    assert!(!a.is_resident());
    let before = runtime.resident_stats().loads;
    let requests = (0..8).map(|_| {
        let a = a.clone();
        tokio::spawn(async move { a.handle_measured(get("/ok"), RequestId(1)).await })
    });
    let mut waited = 0;
    for request in requests.collect::<Vec<_>>() {
        let (outcome, usage) = request.await.unwrap();
        assert!(matches!(outcome, Ok(GuestOutcome::Response(_))), "{outcome:?}");
        waited += usize::from(usage.load > Duration::ZERO);
    }
    assert_eq!(runtime.resident_stats().loads - before, 1, "one compile for all eight");
    assert!(waited >= 1, "at least the first waited for the load");
}

#[tokio::test]
async fn a_module_file_changed_after_its_check_is_not_served_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.wasm");
    std::fs::write(&path, variant("a")).unwrap();
    let runtime = runtime_keeping(1, None);
    let worker = runtime.prepare(file_spec(&path), None).await.unwrap();
    runtime.load(spec(&variant("other"), Limits::default(), &[])).unwrap();
    assert!(!worker.is_resident());

    std::fs::write(&path, variant("b")).unwrap();
    let error = worker.handle(get("/ok"), RequestId(1)).await.unwrap_err();
    assert_eq!(error.kind(), ExecErrorKind::Unloadable);
    assert!(error.detail().contains("changed since the worker was checked"), "{error}");
    assert_eq!(runtime.resident_stats().load_failures, 1);

    // The checked bytes back in place: served again.
    std::fs::write(&path, variant("a")).unwrap();
    still_serves(&worker).await;
}

#[tokio::test]
async fn a_check_recorded_in_the_module_cache_is_trusted_and_nothing_compiles_until_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.wasm");
    std::fs::write(&path, variant("a")).unwrap();
    let cache = || Some(ModuleCache::open(dir.path().join("cache")).unwrap());

    let first = runtime_keeping(4, cache());
    let worker = first.prepare(file_spec(&path), None).await.unwrap();
    assert_eq!(worker.checked(), &Checked::Loaded(CacheOutcome::Miss));
    assert!(worker.is_resident(), "compiled for its check, so kept");

    // A restart: the record stands in for the compile.
    let second = runtime_keeping(4, cache());
    let worker = second.prepare(file_spec(&path), None).await.unwrap();
    assert_eq!(worker.checked(), &Checked::Recorded);
    assert!(!worker.is_resident());
    assert_eq!(second.resident_stats().loads, 0);
    still_serves(&worker).await;
    assert_eq!(second.resident_stats().loads, 1);

    // A record does not excuse the worker's own limits.
    let small = Limits { memory: 64 << 10, ..Limits::default() };
    let error = second.prepare(WorkerSpec { limits: small, ..file_spec(&path) }, None).await;
    assert!(matches!(error, Err(LoadError::InitialMemory { .. })), "{error:?}");

    // A reload with the file untouched reads nothing; a changed file is read again.
    let same = second.prepare(file_spec(&path), Some(&worker)).await.unwrap();
    assert_eq!(same.checked(), &Checked::Unchanged);
    std::fs::write(&path, variant("b")).unwrap();
    let changed = second.prepare(file_spec(&path), Some(&worker)).await.unwrap();
    assert_eq!(changed.checked(), &Checked::Loaded(CacheOutcome::Miss));
    assert_ne!(changed.module_info().digest, worker.module_info().digest);
}

#[tokio::test]
async fn a_runtime_that_copies_data_instead_of_mapping_images_serves_the_same() {
    let config =
        RuntimeConfig { max_instances: 4, memory_init_cow: false, ..RuntimeConfig::default() };
    let runtime = Runtime::new(config, None).unwrap();
    let worker = runtime.load(spec(guests::ECHO_JSON, Limits::default(), &[])).unwrap();
    for _ in 0..3 {
        let mut request = get("/echo");
        request.method = http::Method::POST;
        request.body = r#"{ "a" : [1, 2] }"#.into();
        assert_eq!(response(&worker, request).await.body(), r#"{"a":[1,2]}"#);
    }
}
