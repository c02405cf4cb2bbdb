//! W3C trace context: read from the client's `traceparent`, written to the upstream's, and the
//! trace id for the access log. Spans are `tracing` spans (target
//! [`edgegate_runtime::SPAN_TARGET`]); `edgegate serve` exports them over OTLP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (docs/observability.md).
//!
//! Whether a request has spans at all is decided here, before its first span
//! (`sampled`): a request that is not sampled creates none, so it costs what it would
//! without an exporter, a branch per span. The exporting layer enables a span only under a
//! sampled request's (see `edgegate serve`'s telemetry). Without spans, the client's
//! `traceparent` reaches the upstream as it came.

use std::sync::atomic::{AtomicU64, Ordering};

use edgegate_runtime::RequestId;
use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(key.as_bytes()), HeaderValue::from_str(&value))
        {
            self.0.insert(name, value);
        }
    }
}

/// The share of the traces starting at the gateway that are sampled, as `f64` bits; negative
/// (the start) while nothing exports spans.
static NEW_TRACE_RATIO: AtomicU64 = AtomicU64::new(0xBFF0_0000_0000_0000); // -1.0

/// Spans are exported from now on, `ratio` (0 to 1) of the traces that start at the gateway
/// sampled; a client's `traceparent` is followed either way.
pub fn export_spans(ratio: f64) {
    NEW_TRACE_RATIO.store(ratio.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
}

/// The trace context of the client's `traceparent`, if it sent one: read once per request,
/// for [`sampled`] and [`continue_from`].
pub(crate) fn client(headers: &HeaderMap) -> Option<opentelemetry::Context> {
    headers
        .contains_key(TRACEPARENT)
        .then(|| opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers))))
}

/// Whether request `id` gets spans: never while nothing exports them; as the `client`'s
/// trace context says when it is valid (parent-based, as OpenTelemetry's SDKs sample); else
/// the set share of requests, chosen by a hash of the id.
pub(crate) fn sampled(client: Option<&opentelemetry::Context>, id: RequestId) -> bool {
    let ratio = f64::from_bits(NEW_TRACE_RATIO.load(Ordering::Relaxed));
    if ratio < 0.0 {
        return false;
    }
    if let Some(client) = client.map(|cx| cx.span().span_context().clone())
        && client.is_valid()
    {
        return client.is_sampled();
    }
    // splitmix64: consecutive ids spread evenly over [0, 1).
    let mut z = id.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64) / ((1u64 << 53) as f64) < ratio
}

/// Makes `span` a child of the trace the client's headers carry, if any; returns the trace id
/// to log: the span's when spans are exported, else the client's.
pub(crate) fn continue_from(
    client: Option<opentelemetry::Context>,
    span: &tracing::Span,
) -> Option<String> {
    // The common case, no exporter and no client trace, skips the propagator.
    if span.is_disabled() && client.is_none() {
        return None;
    }
    let parent = client.unwrap_or_else(opentelemetry::Context::current);
    let client = parent.span().span_context().clone();
    // Without an OpenTelemetry layer this does nothing.
    let _ = span.set_parent(parent);
    let own = span.context().span().span_context().clone();
    [own, client].into_iter().find(|c| c.is_valid()).map(|c| c.trace_id().to_string())
}

/// Writes the current span's trace context into an upstream request's headers (replacing the
/// client's `traceparent`), when spans are exported.
pub(crate) fn inject(headers: &mut HeaderMap) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    let cx = span.context();
    if cx.span().span_context().is_valid() {
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&cx, &mut HeadersMut(headers))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the ratio is the process's.
    #[test]
    fn the_client_decides_else_the_ratio_does_and_nothing_without_an_exporter() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let from = |flags: &str| {
            let mut headers = HeaderMap::new();
            let value = format!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{flags}");
            headers.insert(TRACEPARENT, HeaderValue::from_str(&value).unwrap());
            headers
        };
        let none = HeaderMap::new();
        let share = |headers: &HeaderMap| {
            let client = client(headers);
            let ids = (0..10_000u64).map(|n| RequestId(n.wrapping_mul(7) + 3));
            ids.filter(|&id| sampled(client.as_ref(), id)).count()
        };
        assert_eq!(share(&from("01")), 0, "no exporter, no spans");
        export_spans(0.01);
        let roots = share(&none);
        assert!((60..=140).contains(&roots), "about 1 % of 10 000: {roots}");
        assert_eq!(share(&from("01")), 10_000, "a sampled client trace is followed");
        assert_eq!(share(&from("00")), 0, "an unsampled one too");
        let mut broken = HeaderMap::new();
        broken.insert(TRACEPARENT, HeaderValue::from_static("00-zz-00f067aa0ba902b7-01"));
        assert_eq!(share(&broken), roots, "an invalid traceparent starts a new trace");
        export_spans(1.0);
        assert_eq!(share(&none), 10_000);
        export_spans(0.0);
        assert_eq!(share(&none), 0);
    }
}
