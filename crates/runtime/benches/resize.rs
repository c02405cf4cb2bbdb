//! The image-resize workload inside the runtime (no HTTP): the lab's 1600×1200 JPEG decoded,
//! downscaled to 640×480 and encoded again, four ways:
//!
//! | bench | what |
//! |---|---|
//! | `image-resize/capability` | the `image-resize` worker in a fresh instance, the work done by the host's image capability |
//! | `image-resize/wasm` | the `image-resize-wasm` worker: zune-jpeg, a triangle filter and jpeg-encoder, in Wasm |
//! | `image-resize/native-stack` | the capability's code (`edgegate-image`) called directly |
//! | `image-resize/native-pure` | `image-resize-wasm`'s Rust compiled natively |
//!
//! capability ÷ native-stack is what the Wasm worker around the host's work costs; wasm ÷
//! capability is what the capability saves.
//!
//! Run: `cargo bench -p edgegate-runtime --bench resize`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use edgegate_runtime::{
    GuestOutcome, GuestRequest, ImageGrant, Limits, RequestId, Runtime, RuntimeConfig, Worker,
    WorkerSpec,
};

fn worker(runtime: &Runtime, name: &'static str, wasm: &[u8], image: Option<ImageGrant>) -> Worker {
    runtime
        .load(WorkerSpec {
            name,
            source: edgegate_runtime::Source::Bytes(bytes::Bytes::copy_from_slice(wasm)),
            native_code: false,
            // The demo's limits (src/demo.toml), with CPU to spare: a VM's stolen time is not
            // what this measures.
            limits: Limits { memory: 32 << 20, cpu: Duration::from_secs(5), ..Limits::default() },
            config: BTreeMap::new(),
            keys: None,
            kv: Vec::new(),
            fetcher: None,
            image,
        })
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let runtime =
        Runtime::new(RuntimeConfig { max_instances: 4, ..RuntimeConfig::default() }, None).unwrap();
    let capability = worker(
        &runtime,
        "image-resize",
        edgegate_guests::IMAGE_RESIZE,
        Some(ImageGrant::default()),
    );
    let wasm = worker(&runtime, "image-resize-wasm", edgegate_guests::IMAGE_RESIZE_WASM, None);
    let jpeg = bytes::Bytes::from(edgegate_testkit::photo::jpeg());
    let mut request = GuestRequest {
        uri: "/resize".parse().unwrap(),
        body: jpeg.clone(),
        ..GuestRequest::default()
    };
    request.method = http::Method::POST;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    let mut group = c.benchmark_group("image-resize");
    group.sample_size(20).measurement_time(Duration::from_secs(8));
    for (name, worker) in [("capability", &capability), ("wasm", &wasm)] {
        group.bench_function(name, |b| {
            b.iter(|| match rt.block_on(worker.handle(request.clone(), RequestId(1))) {
                Ok(GuestOutcome::Response(response)) => assert_eq!(response.status(), 200),
                other => panic!("{other:?}"),
            })
        });
    }
    let spec = edgegate_image::TransformSpec { width: 640, height: 480, ..Default::default() };
    let budget = || edgegate_image::Budget {
        cpu: Duration::from_secs(5),
        deadline: Instant::now() + Duration::from_secs(5),
    };
    let limits = edgegate_image::Limits::default();
    group.bench_function("native-stack", |b| {
        b.iter(|| assert!(edgegate_image::transform(&jpeg, &spec, &limits, &budget()).0.is_ok()))
    });
    let target = image_resize_wasm::Target::default();
    group.bench_function("native-pure", |b| {
        b.iter(|| assert!(image_resize_wasm::resize_jpeg(&jpeg, &target).is_ok()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
