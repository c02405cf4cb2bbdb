//! The KV and fetch hostcalls through the hostile guest, on real stores.

use std::sync::Arc;
use std::time::Duration;

use edgegate_kv::{MemoryStore, Namespace, RedisSettings, RedisStore, Store};

use super::*;

fn memory(name: &str) -> Namespace {
    Namespace { name: name.into(), store: Store::Memory(Arc::new(MemoryStore::new(8 << 20))) }
}

fn kv_worker(namespaces: Vec<Namespace>, limits: Limits) -> Worker {
    runtime()
        .load(WorkerSpec {
            name: "hostile",
            source: crate::Source::Bytes(bytes::Bytes::copy_from_slice(
                &std::fs::read(guests::HOSTILE).unwrap(),
            )),
            native_code: false,
            limits,
            config: BTreeMap::new(),
            keys: None,
            kv: namespaces,
            fetcher: None,
            image: None,
        })
        .unwrap()
}

/// Status and body of one request.
async fn call(worker: &Worker, path: &str) -> (u16, String) {
    let r = response(worker, get(path)).await;
    (r.status().as_u16(), String::from_utf8_lossy(r.body()).into_owned())
}

fn ok(body: &str) -> (u16, String) {
    (200, body.to_owned())
}

fn err(code: &str) -> (u16, String) {
    (500, code.to_owned())
}

#[tokio::test]
async fn every_kv_call_through_the_guest() {
    let w = kv_worker(vec![memory("t")], Limits::default());
    assert_eq!(call(&w, "/kv?op=get&key=a").await, ok("(none)"));
    assert_eq!(call(&w, "/kv?op=put&key=a&n=3").await, ok("stored"));
    assert_eq!(call(&w, "/kv?op=get&key=a").await, ok("vvv"));
    assert_eq!(call(&w, "/kv?op=incr&key=c&delta=5").await, ok("5"));
    assert_eq!(call(&w, "/kv?op=incr&key=c&delta=-8").await, ok("-3"));
    assert_eq!(call(&w, "/kv?op=incr&key=a").await, err("NotAnInteger"));
    assert_eq!(call(&w, "/kv?op=batch&n=20").await, ok("20 found"));
    let (status, listed) = call(&w, "/kv?op=list&key=b1&n=100").await;
    assert_eq!(status, 200);
    let expected: Vec<String> =
        ["b1", "b10", "b11", "b12", "b13", "b14", "b15", "b16", "b17", "b18", "b19"]
            .map(String::from)
            .to_vec();
    assert_eq!(listed.lines().collect::<Vec<_>>(), expected);
    assert_eq!(call(&w, "/kv?op=delete&key=a").await, ok("true"));
    assert_eq!(call(&w, "/kv?op=delete&key=a").await, ok("false"));
    // State lives in the store, not the instance: a fresh instance per request still sees it.
    assert_eq!(call(&w, "/kv?op=get&key=c").await, ok("-3"));
}

#[tokio::test]
async fn a_value_larger_than_the_first_buffer_is_read_whole() {
    let w = kv_worker(vec![memory("t")], Limits::default());
    assert_eq!(call(&w, "/kv?op=put&key=big&n=100000").await, ok("stored"));
    let (status, body) = call(&w, "/kv?op=get&key=big").await;
    assert_eq!((status, body.len()), (200, 100_000));
    assert!(body.bytes().all(|b| b == b'v'));
}

#[tokio::test]
async fn namespace_grants_are_enforced() {
    let w = kv_worker(vec![memory("t")], Limits::default());
    assert_eq!(call(&w, "/kv?op=get&ns=other").await, err("NotGranted"));
    assert_eq!(call(&w, "/kv?op=put&ns=other&n=1").await, err("NotGranted"));
    assert_eq!(call(&w, "/kv?op=incr&ns=t2").await, err("NotGranted"), "no prefix matching");
    let none = kv_worker(Vec::new(), Limits::default());
    assert_eq!(call(&none, "/kv?op=get").await, err("NotGranted"));
    still_serves(&none).await;
}

#[tokio::test]
async fn kv_limits_are_error_codes_not_traps() {
    let limits = Limits { kv_ops: 10, kv_value: 1000, ..Limits::default() };
    let w = kv_worker(vec![memory("t")], limits);
    let long_key = "k".repeat(edgegate_abi::kv::MAX_KEY_LEN + 1);
    assert_eq!(call(&w, &format!("/kv?op=get&key={long_key}")).await, err("LimitExceeded"));
    assert_eq!(call(&w, &format!("/kv?op=put&key={long_key}&n=1")).await, err("LimitExceeded"));
    let max_key = "k".repeat(edgegate_abi::kv::MAX_KEY_LEN);
    assert_eq!(call(&w, &format!("/kv?op=put&key={max_key}&n=1")).await, ok("stored"));
    assert_eq!(call(&w, "/kv?op=put&key=v&n=1001").await, err("LimitExceeded"));
    assert_eq!(call(&w, "/kv?op=get&key=v").await, ok("(none)"), "nothing was written");
    assert_eq!(call(&w, "/kv?op=put&key=v&n=1000").await, ok("stored"));
    // 10 operations per request: 10 gets pass, 11 do not; a batch counts each key.
    assert_eq!(call(&w, "/kv?op=many&key=v&n=10").await, ok("10 found"));
    assert_eq!(call(&w, "/kv?op=many&key=v&n=11").await, err("LimitExceeded"));
    assert_eq!(call(&w, "/kv?op=batch&n=11").await, err("LimitExceeded"));
    assert_eq!(call(&w, "/kv?op=batch&n=5").await, ok("5 found"), "5 puts + 5 gets");
    // What the request's usage says it made is what the limit counted.
    let (_, usage) = w.handle_measured(get("/kv?op=many&key=v&n=7"), RequestId(9)).await;
    assert_eq!((usage.kv_ops, usage.fetches), (7, 0));
    // Pointers outside memory, a negative TTL, a malformed batch: each an error code.
    let invalid = edgegate_abi::HostError::InvalidArgument.code();
    assert_eq!(call(&w, "/kv-abuse").await, ok(&[invalid; 5].map(|c| c.to_string()).join(" ")));
    still_serves(&w).await;
}

#[tokio::test]
async fn a_full_namespace_refuses_writes_with_a_code() {
    let tiny =
        Namespace { name: "t".into(), store: Store::Memory(Arc::new(MemoryStore::new(100))) };
    let w = kv_worker(vec![tiny], Limits::default());
    assert_eq!(call(&w, "/kv?op=put&key=a&n=90").await, ok("stored"));
    assert_eq!(call(&w, "/kv?op=put&key=b&n=90").await, err("LimitExceeded"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_on_redis_is_not_charged_to_the_cpu_budget() {
    let port = edgegate_testkit::redis::silent_server();
    let store = RedisStore::new(RedisSettings {
        url: format!("redis://127.0.0.1:{port}"),
        timeout: Duration::from_millis(150),
        prefix: Vec::new(),
    })
    .unwrap();
    let ns = Namespace { name: "t".into(), store: Store::Redis(Arc::new(store)) };
    // Five waits of 150 ms against a 2 ms CPU budget: the guest gets its Timeout codes and
    // answers; neither the CPU budget nor a blocked thread stops it.
    let limits = Limits { deadline: Duration::from_secs(5), ..Limits::default() };
    let w = kv_worker(vec![ns], limits);
    let started = std::time::Instant::now();
    let (status, body) = call(&w, "/kv?op=many&n=5").await;
    assert_eq!((status, body.as_str()), (500, "Timeout"), "the first wait times out");
    assert!(started.elapsed() >= Duration::from_millis(140), "{:?}", started.elapsed());
    // Meanwhile the runtime thread was free: other requests run while one waits.
    let slow = tokio::spawn({
        let w = w.clone();
        async move { call(&w, "/kv?op=get").await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let before = std::time::Instant::now();
    assert_eq!(call(&w, "/ok").await, ok("ok"));
    assert!(before.elapsed() < Duration::from_millis(100), "{:?}", before.elapsed());
    assert_eq!(slow.await.unwrap(), err("Timeout"));
}
