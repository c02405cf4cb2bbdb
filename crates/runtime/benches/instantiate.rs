//! The per-request cost of isolation: a fresh instance, one call, teardown.
//!
//! * `isolation/trivial-handler`: the hostile guest's `/ok` (answers "ok"): the cost of the
//!   fresh instance, request copy-in, call and teardown, with almost no guest work.
//! * `echo-json/isolation`: the same for the echo-json module itself, on a path where the
//!   worker does no work (a GET, answered 405 at once).
//! * `echo-json/1KiB`: the static-json workload end to end inside the runtime (no HTTP):
//!   instantiate, parse and re-serialize about 1 KiB of JSON, decode the response, drop.
//!   `cargo bench -p echo-json` runs the same handler natively, for the cost of Wasm.
//!
//! * `abi/*`: a core module against a `wasi:http` component, the same trivial answer both
//!   ways (the hostile guest's `/ok`, the component's `/hello`): instantiating alone (a
//!   trial: instantiate and drop) and the whole request.
//!
//! Run: `cargo bench -p edgegate-runtime --bench instantiate`

use std::collections::BTreeMap;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edgegate_runtime::{
    GuestOutcome, GuestRequest, Limits, RequestId, Runtime, RuntimeConfig, Worker, WorkerSpec,
};

fn load(runtime: &Runtime, wasm: &[u8]) -> Worker {
    runtime
        .load(WorkerSpec {
            name: "bench",
            source: edgegate_runtime::Source::Bytes(bytes::Bytes::copy_from_slice(wasm)),
            // Not testing the budget: on a VM, stolen time is now and then charged to the
            // thread running the guest (seen here: a few ms once in a million requests).
            limits: Limits { cpu: std::time::Duration::from_secs(1), ..Limits::default() },
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
    let mut group = c.benchmark_group("echo-json");
    group.bench_function("isolation", |b| b.iter(|| run_expecting(405, &echo, &get)));
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("1KiB", |b| b.iter(|| run(&echo, &request)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
