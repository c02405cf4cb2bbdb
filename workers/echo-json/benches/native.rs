//! The echo-json handler compiled natively, without Wasm: the ceiling for
//! `cargo bench -p edgegate-runtime --bench instantiate -- echo-json`, and the compactor alone
//! on the lab's static-json body (already compact) and on the same body pretty-printed.
//!
//! Run: `cargo bench -p echo-json --bench native`

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
    group.bench_function("compact/compact-1KiB", |b| {
        b.iter(|| echo_json::compact(std::hint::black_box(body.as_bytes())).map(|c| c.len()))
    });
    let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
    group.throughput(Throughput::Bytes(pretty.len() as u64));
    group.bench_function("compact/pretty", |b| {
        b.iter(|| echo_json::compact(std::hint::black_box(pretty.as_bytes())).map(|c| c.len()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
