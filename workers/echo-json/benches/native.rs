//! The echo-json handler compiled natively, without Wasm: the ceiling for
//! `cargo bench -p edgegate-runtime --bench instantiate -- echo-json`.
//!
//! Run: `cargo bench -p echo-json`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edgegate_sdk::testing::TestRequest;

fn bench(c: &mut Criterion) {
    let items: Vec<String> = (0..20)
        .map(|i| {
            format!(r#"{{"id":{i},"name":"item-{i}","tags":["a","b"],"price":{i}.5,"ok":true}}"#)
        })
        .collect();
    let body = format!(r#"{{"items":[{}],"note":"x"}}"#, items.join(","));
    let request = TestRequest::new("POST", "/echo")
        .header("content-type", "application/json")
        .body(body.as_bytes());
    let mut group = c.benchmark_group("echo-json-native");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("1KiB", |b| {
        b.iter(|| {
            let response = echo_json::handle(&request.request());
            assert_eq!(response.status(), 200);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
