//! Host bindings for the interfaces beyond the proxy world that edgegate implements for
//! components: `wasi:keyvalue@0.2.0-draft` (store, atomics, batch) and `wasi:config/store@0.2.0-rc.1`,
//! generated from the WIT in `crates/runtime/wit`.
//!
//! Wasmtime's own crates for these (`wasmtime-wasi-keyvalue`, `wasmtime-wasi-config`) keep their
//! bindings private and bring their own providers: the keyvalue one is an in-memory map copied
//! into each bucket and forgotten when the request ends. edgegate's buckets are its KV namespaces,
//! so it generates the bindings and implements them over its stores
//! ([`keyvalue`](super::keyvalue), [`config`](super::config)).

wasmtime::component::bindgen!({
    path: "wit",
    world: "edgegate:components/host",
    imports: {
        "wasi:config/store": trappable,
        default: async | trappable,
    },
    with: {
        "wasi:keyvalue/store.bucket": super::bucket::Bucket,
    },
    trappable_error_type: {
        "wasi:keyvalue/store.error" => super::bucket::KvFailure,
    },
    require_store_data_send: true,
});

pub(crate) use wasi::{config, keyvalue};
