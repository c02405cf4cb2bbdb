//! W3C trace context: read from the client's `traceparent`, written to the upstream's, and the
//! trace id for the access log. Spans are `tracing` spans (target
//! [`edgegate_runtime::SPAN_TARGET`]); `edgegate serve` exports them over OTLP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (docs/observability.md). Without an exporter the spans
//! are disabled and cost a branch each, and the client's `traceparent` still reaches the
//! upstream as it came.

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

/// Makes `span` a child of the trace the client's headers carry, if any; returns the trace id
/// to log: the span's when spans are exported, else the client's.
pub(crate) fn continue_from(headers: &HeaderMap, span: &tracing::Span) -> Option<String> {
    // The common case, no exporter and no client trace, skips the propagator.
    if span.is_disabled() && !headers.contains_key(TRACEPARENT) {
        return None;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
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
