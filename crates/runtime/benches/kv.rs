//! The cost of one in-memory KV get through the hostcall, as a guest sees it.
//!
//! * `kv/hostcall-get`: per get, the hostile guest's `/kv?op=many&n=1000` (1000
//!   `Namespace::get_into`s of a 256-byte value into one buffer, in one request) minus its `n=0` (the same request, no get), divided by
//!   1000: the SDK call, the hostcall (namespace lookup, key copied out, the store's lookup,
//!   the value copied into guest memory) and back. Both requests run on fresh instances, so
//!   everything else cancels.
//! * `kv/memory-get`: the in-memory store's `get` alone, natively, for comparison.
//!
//! Run: `cargo bench -p edgegate-runtime --bench kv`

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use edgegate_kv::{Backend, MemoryStore, Namespace, Store};
use edgegate_runtime::{
    GuestOutcome, GuestRequest, Limits, RequestId, Runtime, RuntimeConfig, WorkerSpec,
};

const GETS: u32 = 1000;

fn bench(c: &mut Criterion) {
    let runtime =
        Runtime::new(RuntimeConfig { max_instances: 4, ..RuntimeConfig::default() }, None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let memory = Arc::new(MemoryStore::new(1 << 20));
    rt.block_on(memory.put(b"k", &[b'v'; 256], None)).unwrap();
    let worker = runtime
        .load(WorkerSpec {
            name: "bench",
            source: edgegate_runtime::Source::File(edgegate_guests::HOSTILE.into()),
            native_code: false,
            limits: Limits {
                cpu: Duration::from_secs(1),
                kv_ops: GETS,
                hostcalls: GETS + 100,
                ..Limits::default()
            },
            config: BTreeMap::new(),
            keys: None,
            kv: vec![Namespace { name: "t".into(), store: Store::Memory(memory.clone()) }],
            fetcher: None,
            image: None,
        })
        .unwrap();
    let request = |n: u32| GuestRequest {
        uri: format!("/kv?op=many&key=k&n={n}").parse().unwrap(),
        ..GuestRequest::default()
    };
    let (with, without) = (request(GETS), request(0));
    let time = |request: &GuestRequest, found: u32| {
        let started = Instant::now();
        match rt.block_on(worker.handle(request.clone(), RequestId(1))) {
            Ok(GuestOutcome::Response(r)) => assert_eq!(r.body(), &format!("{found} found")),
            other => panic!("{other:?}"),
        }
        started.elapsed()
    };

    c.bench_function("kv/hostcall-get", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let difference = time(&with, GETS).saturating_sub(time(&without, 0));
                total += difference / GETS;
            }
            total
        })
    });
    // The store's future is ready at once: poll it once, without an executor.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    c.bench_function("kv/memory-get", |b| {
        b.iter(|| {
            let get = std::pin::pin!(memory.get(std::hint::black_box(b"k")));
            match get.poll(&mut cx) {
                std::task::Poll::Ready(value) => value.unwrap(),
                std::task::Poll::Pending => unreachable!("the memory store never waits"),
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
