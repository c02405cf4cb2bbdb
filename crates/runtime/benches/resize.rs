//! The image-resize workload inside the runtime (no HTTP): the lab's 1600×1200 JPEG decoded,
//! downscaled to 640×480 and encoded again, by the worker in a fresh Wasm instance
//! (`image-resize/wasm`) and by the same Rust compiled natively (`image-resize/native`). Their
//! ratio is the cost of Wasm on the heaviest workload.
//!
//! Run: `cargo bench -p edgegate-runtime --bench resize`

use std::collections::BTreeMap;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use edgegate_runtime::{
    GuestOutcome, GuestRequest, Limits, RequestId, Runtime, RuntimeConfig, WorkerSpec,
};

fn bench(c: &mut Criterion) {
    let runtime =
        Runtime::new(RuntimeConfig { max_instances: 4, ..RuntimeConfig::default() }, None).unwrap();
    let worker = runtime
        .load(WorkerSpec {
            name: "image-resize",
            wasm: edgegate_guests::IMAGE_RESIZE,
            // The demo's limits (src/demo.toml), with CPU to spare: a VM's stolen time is not
            // what this measures.
            limits: Limits {
                memory: 32 << 20,
                cpu: Duration::from_secs(5),
                request_body: 8 << 20,
                ..Limits::default()
            },
            config: BTreeMap::new(),
            keys: None,
            kv: Vec::new(),
            fetcher: None,
        })
        .unwrap();
    let jpeg = edgegate_bench::workload::sample_jpeg();
    let mut request = GuestRequest {
        uri: "/resize".parse().unwrap(),
        body: jpeg.clone(),
        ..GuestRequest::default()
    };
    request.method = http::Method::POST;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    let mut group = c.benchmark_group("image-resize");
    group.sample_size(20).measurement_time(Duration::from_secs(8));
    group.bench_function("wasm", |b| {
        b.iter(|| match rt.block_on(worker.handle(request.clone(), RequestId(1))) {
            Ok(GuestOutcome::Response(response)) => assert_eq!(response.status(), 200),
            other => panic!("{other:?}"),
        })
    });
    let target = image_resize::Target::default();
    group.bench_function("native", |b| {
        b.iter(|| assert!(image_resize::resize_jpeg(&jpeg, &target).is_ok()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
