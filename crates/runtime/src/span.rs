//! The `tracing` target of edgegate's trace spans: a leaf every part that opens a span names.

/// The `tracing` target of edgegate's trace spans (request, instantiate, guest, hostcalls,
/// upstream): exported over OTLP when configured, and kept out of the logs.
pub const SPAN_TARGET: &str = "edgegate::span";
