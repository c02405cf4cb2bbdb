//! The guest programs, built for `wasm32-unknown-unknown` by this crate's build script.
//!
//! * Demo workers are embedded as bytes ([`ECHO_JSON`], [`ECHO_JSON_COMPONENT`],
//!   [`AUTH_ROUTER`], [`KV_LOOKUP`], [`KV_LOOKUP_COMPONENT`], [`FAN_OUT`], [`IMAGE_RESIZE`], [`IMAGE_RESIZE_WASM`],
//!   [`JSON_TRANSFORM`]); [`BUILTIN`] lists them by the name a configuration uses
//!   (`module = "builtin:echo-json"`). `echo-json-component` and `kv-lookup-component` are
//!   `wasi:http/proxy` components, the rest are core modules of edgegate's ABI.
//! * With the `test-programs` feature (dev-dependencies only), the hostile guests used by tests
//!   are built too and named by path: `HOSTILE` (Rust, see
//!   `programs/hostile/src/lib.rs`) and one constant per `programs/*.wat` file.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// The workers bundled into the gateway binary, by name.
pub const BUILTIN: &[(&str, &[u8])] = &[
    ("echo-json", ECHO_JSON),
    ("echo-json-component", ECHO_JSON_COMPONENT),
    ("auth-router", AUTH_ROUTER),
    ("kv-lookup", KV_LOOKUP),
    ("kv-lookup-component", KV_LOOKUP_COMPONENT),
    ("fan-out", FAN_OUT),
    ("image-resize", IMAGE_RESIZE),
    ("image-resize-wasm", IMAGE_RESIZE_WASM),
    ("json-transform", JSON_TRANSFORM),
];

/// [`WASIP2_STD`]'s path, for a test that needs it; `None` when the toolchain lacks the
/// `wasm32-wasip2` target, said loudly, and a failure where `EDGEGATE_REQUIRE_WASIP2=1` (CI).
#[cfg(feature = "test-programs")]
pub fn wasip2_std() -> Option<&'static str> {
    if WASIP2_STD.is_none() {
        edgegate_testkit::skipped(
            "the std guest built for wasm32-wasip2",
            "the wasm32-wasip2 target is not installed (`rustup target add wasm32-wasip2`)",
            "EDGEGATE_REQUIRE_WASIP2",
        );
    }
    WASIP2_STD
}
