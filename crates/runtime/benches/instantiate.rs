//! The per-request cost of isolation: a fresh instance, one call, teardown.
//!
//! * `isolation/trivial-handler`: the hostile guest's `/ok` (answers "ok"): the cost of the
//!   fresh instance, request copy-in, call and teardown, with almost no guest work.
//! * `echo-json/isolation`: the same for the echo-json module itself, on a path where the
//!   worker does no work (a GET, answered 405 at once).
//! * `echo-json/1KiB`: the static-json workload end to end inside the runtime (no HTTP):
//!   instantiate, parse and re-serialize about 1 KiB of JSON, decode the response, drop.
//!   `cargo bench -p echo-json` runs the same handler natively, for the cost of Wasm.
//! * `echo-json/isolation/fiber`, `echo-json/1KiB/fiber`: the same on a fiber. echo-json
//!   imports no host function that may wait, so with a budget of at most 10 ms it is
//!   instantiated and called directly; these force the fiber (a 1 s budget) to show what
//!   going without one saves.
//!
//! The hostile guest imports the KV calls, which may wait: `isolation/*` and `abi/*` run on
//! a fiber, as such a worker does.
//!
//! * `abi/*`: a core module against a `wasi:http` component, the same trivial answer both
//!   ways (the hostile guest's `/ok`, the component's `/hello`): instantiating alone (a
//!   trial: instantiate and drop) and the whole request.
//! * `abi/kv-get/*`: the db-lookup request both ways: `kv-lookup` (the core ABI's `kv_get`)
//!   and `kv-lookup-component` (`wasi:keyvalue`), a 256-byte value from a memory namespace.
//!
//! Run: `cargo bench -p edgegate-runtime --bench instantiate`

use std::collections::BTreeMap;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edgegate_runtime::{
    GuestOutcome, GuestRequest, Limits, RequestId, Runtime, RuntimeConfig, Worker, WorkerSpec,
};

/// A worker with a 10 ms CPU budget: called without a fiber when it imports nothing that may
/// wait, as the default 2 ms budget is. Far from the budget: stolen time charged to the
/// thread (a few ms once in a million requests on this VM) cannot stop a request that runs
/// for microseconds, since a stop needs the guest seen running at ten epoch ticks.
fn load(runtime: &Runtime, wasm: &[u8]) -> Worker {
    load_with_cpu(runtime, wasm, std::time::Duration::from_millis(10))
}

/// A worker that always runs on a fiber: its CPU budget is over the most a worker called
/// without one may have.
fn load_on_fiber(runtime: &Runtime, wasm: &[u8]) -> Worker {
    load_with_cpu(runtime, wasm, std::time::Duration::from_secs(1))
}

fn load_with_cpu(runtime: &Runtime, wasm: &[u8], cpu: std::time::Duration) -> Worker {
    runtime
        .load(WorkerSpec {
            name: "bench",
            source: edgegate_runtime::Source::Bytes(bytes::Bytes::copy_from_slice(wasm)),
            native_code: false,
            limits: Limits { cpu, ..Limits::default() },
            config: BTreeMap::new(),
            keys: None,
            kv: Vec::new(),
            fetcher: None,
            image: None,
        })
        .unwrap()
}

fn json_1k() -> Bytes {
    let items: Vec<String> = (0..20)
        .map(|i| {
            format!(r#"{{"id":{i},"name":"item-{i}","tags":["a","b"],"price":{i}.5,"ok":true}}"#)
        })
        .collect();
    Bytes::from(format!(r#"{{"items":[{}],"note":"x"}}"#, items.join(",")))
}

fn bench(c: &mut Criterion) {
    let runtime =
        Runtime::new(RuntimeConfig { max_instances: 16, ..RuntimeConfig::default() }, None)
            .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let run_expecting = |status: u16, worker: &Worker, request: &GuestRequest| match rt
        .block_on(worker.handle(request.clone(), RequestId(1)))
    {
        Ok(GuestOutcome::Response(response)) => assert_eq!(response.status(), status),
        other => panic!("{other:?}"),
    };
    let run = |worker: &Worker, request: &GuestRequest| run_expecting(200, worker, request);

    let hostile = load(&runtime, &std::fs::read(edgegate_guests::HOSTILE).unwrap());
    let ok = GuestRequest { uri: "/ok".parse().unwrap(), ..GuestRequest::default() };
    let mut group = c.benchmark_group("isolation");
    group.throughput(Throughput::Elements(1));
    group.bench_function("trivial-handler", |b| b.iter(|| run(&hostile, &ok)));
    group.finish();

    let component = load(&runtime, &std::fs::read(edgegate_guests::HTTP_COMPONENT).unwrap());
    let mut hello = GuestRequest { uri: "/hello".parse().unwrap(), ..GuestRequest::default() };
    hello.headers.insert("host", "bench".parse().unwrap());
    let mut group = c.benchmark_group("abi");
    group
        .bench_function("instantiate/module", |b| b.iter(|| rt.block_on(hostile.trial()).unwrap()));
    group.bench_function("instantiate/component", |b| {
        b.iter(|| rt.block_on(component.trial()).unwrap())
    });
    group.bench_function("request/module", |b| b.iter(|| run(&hostile, &ok)));
    group.bench_function("request/component", |b| b.iter(|| run(&component, &hello)));
    let store = edgegate_kv::MemoryStore::new(1 << 20);
    rt.block_on(edgegate_kv::Backend::put(&store, b"user:7", &[b'x'; 256], None)).unwrap();
    let namespace = edgegate_kv::Namespace {
        name: "demo".into(),
        store: edgegate_kv::Store::Memory(std::sync::Arc::new(store)),
    };
    let kv_worker = |wasm: &[u8]| {
        let limits = Limits { cpu: std::time::Duration::from_millis(10), ..Limits::default() };
        let config = [("namespace", "demo"), ("prefix", "/kv/")];
        runtime
            .load(WorkerSpec {
                name: "bench",
                source: edgegate_runtime::Source::Bytes(Bytes::copy_from_slice(wasm)),
                native_code: false,
                limits,
                config: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                keys: None,
                kv: vec![namespace.clone()],
                fetcher: None,
                image: None,
            })
            .unwrap()
    };
    let (kv_module, kv_component) =
        (kv_worker(edgegate_guests::KV_LOOKUP), kv_worker(edgegate_guests::KV_LOOKUP_COMPONENT));
    let mut user = GuestRequest { uri: "/kv/user:7".parse().unwrap(), ..GuestRequest::default() };
    user.headers.insert("host", "bench".parse().unwrap());
    group.bench_function("kv-get/module", |b| b.iter(|| run(&kv_module, &user)));
    group.bench_function("kv-get/component", |b| b.iter(|| run(&kv_component, &user)));
    group.finish();

    let echo = load(&runtime, edgegate_guests::ECHO_JSON);
    let body = json_1k();
    let mut request = GuestRequest {
        uri: "/echo".parse().unwrap(),
        body: body.clone(),
        ..GuestRequest::default()
    };
    request.method = http::Method::POST;
    request.headers.insert("content-type", "application/json".parse().unwrap());
    let get = GuestRequest { uri: "/echo".parse().unwrap(), ..GuestRequest::default() };
    let echo_on_fiber = load_on_fiber(&runtime, edgegate_guests::ECHO_JSON);
    let mut group = c.benchmark_group("echo-json");
    group.bench_function("isolation", |b| b.iter(|| run_expecting(405, &echo, &get)));
    group
        .bench_function("isolation/fiber", |b| b.iter(|| run_expecting(405, &echo_on_fiber, &get)));
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("1KiB", |b| b.iter(|| run(&echo, &request)));
    group.bench_function("1KiB/fiber", |b| b.iter(|| run(&echo_on_fiber, &request)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
