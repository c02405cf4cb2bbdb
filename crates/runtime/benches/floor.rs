//! Wasmtime's own floor for a fresh instance per request on this machine, with no edgegate
//! code: what any embedder pays to create a store, take an instance from the pool, call one
//! export and give the slot back, with the pool configured as edgegate configures it.
//!
//! * `floor/sync`: `Store::new`, `InstancePre::instantiate`, one typed call, drop. The module
//!   has one memory page and no imports; the call returns at once.
//! * `floor/async`: the same through `instantiate_async` and `call_async`: the call runs on a
//!   pooled fiber stack, as it must when a guest may suspend in an asynchronous host call.
//! * `floor/async-touch-4-pages`: the async call writes one byte to each of four pages, as a
//!   guest's stack and first heap pages are: the pool then has dirty pages to reset.
//! * `floor/async-touch-4-pages-no-pagemap`: the same without `PAGEMAP_SCAN`: the kept
//!   resident window is reset with `memset` whether it was written or not.
//!
//! Run: `cargo bench -p edgegate-runtime --bench floor` (figures: docs/benchmarks.md, "Wasmtime's floor")

use criterion::{Criterion, criterion_group, criterion_main};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module,
    PoolingAllocationConfig, Store,
};

const MODULE: &str = r#"
(module
  (memory (export "memory") 8)
  (func (export "noop") (result i32) i32.const 0)
  (func (export "touch") (result i32)
    (i32.store8 (i32.const 0) (i32.const 1))
    (i32.store8 (i32.const 65536) (i32.const 1))
    (i32.store8 (i32.const 131072) (i32.const 1))
    (i32.store8 (i32.const 196608) (i32.const 1))
    i32.const 0))
"#;

/// The pool as `engine::new_engine` sets it up (64 KiB kept resident, reset with
/// `PAGEMAP_SCAN` where the kernel has it, unless `pagemap` is off).
fn new_engine(pagemap: bool) -> Engine {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(16)
        .total_memories(16)
        .total_tables(16)
        .total_stacks(16)
        .max_memories_per_module(1)
        .max_tables_per_module(1)
        .max_memory_size(128 << 20)
        .linear_memory_keep_resident(64 << 10)
        .table_keep_resident(64 << 10)
        .pagemap_scan(if pagemap { Enabled::Auto } else { Enabled::No });
    let mut config = Config::new();
    config
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .epoch_interruption(true)
        .memory_init_cow(true);
    Engine::new(&config).unwrap()
}

fn pre(engine: &Engine) -> InstancePre<()> {
    let wasm = wat::parse_str(MODULE).unwrap();
    let module = Module::new(engine, wasm).unwrap();
    Linker::new(engine).instantiate_pre(&module).unwrap()
}

fn new_store(engine: &Engine) -> Store<()> {
    let mut store = Store::new(engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    store
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut group = c.benchmark_group("floor");

    let engine = new_engine(true);
    let pre = pre(&engine);
    group.bench_function("sync", |b| {
        b.iter(|| {
            let mut store = new_store(&engine);
            let instance = pre.instantiate(&mut store).unwrap();
            let noop = instance.get_typed_func::<(), i32>(&mut store, "noop").unwrap();
            noop.call(&mut store, ()).unwrap()
        })
    });
    let call_async = |pre: &InstancePre<()>, export: &'static str| {
        let engine = pre.module().engine().clone();
        let pre = pre.clone();
        rt.block_on(async move {
            let mut store = new_store(&engine);
            let instance = pre.instantiate_async(&mut store).await.unwrap();
            let f = instance.get_typed_func::<(), i32>(&mut store, export).unwrap();
            f.call_async(&mut store, ()).await.unwrap()
        })
    };
    group.bench_function("async", |b| b.iter(|| call_async(&pre, "noop")));
    group.bench_function("async-touch-4-pages", |b| b.iter(|| call_async(&pre, "touch")));

    let no_pagemap = new_engine(false);
    let pre_no_pagemap = self::pre(&no_pagemap);
    group.bench_function("async-touch-4-pages-no-pagemap", |b| {
        b.iter(|| call_async(&pre_no_pagemap, "touch"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
