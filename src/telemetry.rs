//! Logs and trace export for the whole process (docs/observability.md).
//!
//! * Logs go to stderr, filtered by `EDGEGATE_LOG` (`tracing_subscriber::EnvFilter` syntax,
//!   e.g. `info,edgegate::access=warn`; `info` by default), as text or, with
//!   `--log-format json`, one JSON object per line, through a bounded queue and a thread of
//!   their own ([`edgegate_host::observe::log_writer`]): no request waits on a write.
//! * Trace spans (target [`edgegate_runtime::SPAN_TARGET`]) are never logged. They are exported
//!   over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is
//!   set, over HTTP with protobuf or over gRPC as `OTEL_EXPORTER_OTLP_PROTOCOL` (or
//!   `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`) says, sampled at `OTEL_TRACES_SAMPLER_ARG`
//!   (a ratio, 1.0 by default; a sampled client `traceparent` is always followed), and not
//!   created at all otherwise.
//! * The W3C trace-context propagator reads `traceparent` whether or not spans are exported,
//!   so the access log carries the client's trace id either way.

use anyhow::Context;
use edgegate_host::observe::access_line::{self, ACCESS_TARGET};
use edgegate_host::observe::audit::AUDIT_TARGET;
use edgegate_host::observe::log_writer::{Flushed, LogWriter};
use edgegate_runtime::SPAN_TARGET;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::filter::{self, EnvFilter, FilterExt, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// Keeps the log writer and the span exporter running; dropping it writes out the queued log
/// lines and flushes the spans not yet sent.
pub struct Telemetry {
    exporter: Option<(SdkTracerProvider, tokio::runtime::Runtime)>,
    _logs: Flushed,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some((provider, _runtime)) = self.exporter.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: flushing trace spans: {e}");
        }
    }
}

/// Installs the process's subscriber. Fails only when `EDGEGATE_LOG_QUEUE` is not a number
/// of lines or the OTLP exporter cannot be set up.
pub fn init(format: LogFormat) -> anyhow::Result<Telemetry> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let directives = std::env::var("EDGEGATE_LOG").ok();
    // The audit line of each change through the admin API is kept unless asked about by name.
    let audited = |d: &str| match d.contains(AUDIT_TARGET) {
        true => d.to_owned(),
        false => format!("{d},{AUDIT_TARGET}=info"),
    };
    let filter = directives
        .as_deref()
        .and_then(|d| EnvFilter::try_new(audited(d)).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let (writer, guard) = edgegate_host::observe::log_writer::non_blocking(std::io::stderr())?;
    let exporter = exporter()?;
    let ansi = format == LogFormat::Text && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let lines = writer.clone();
    // Without an exporter, no spans layer at all: an absent (`None`) layer would declare an
    // interest in every callsite, and each request's spans would be built for nobody.
    match &exporter {
        Some((provider, _)) => tracing_subscriber::registry()
            .with(under_a_request(logged_levels(&filter)))
            .with(logs_layer(format, ansi, writer, filter))
            .with(spans_layer(provider))
            .init(),
        None => {
            tracing_subscriber::registry().with(logs_layer(format, ansi, writer, filter)).init()
        }
    }
    // Access lines skip the subscriber, written as it would write them, at the levels it lets
    // through; not in colour, nor when a directive depends on the current span (`[span]`).
    if !ansi && !directives.is_some_and(|d| d.contains('[')) {
        access_line::install(lines, format == LogFormat::Json, access_levels());
    }
    Ok(Telemetry { exporter, _logs: guard })
}

/// The log lines, in `format` (in colour if `ansi`), through `writer`, as `filter` allows.
fn logs_layer<S>(
    format: LogFormat,
    ansi: bool,
    writer: LogWriter,
    filter: EnvFilter,
) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    match format {
        LogFormat::Text => fmt::layer().with_writer(writer).with_ansi(ansi).boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(writer)
            .boxed(),
    }
    .with_filter(filter.and(not_spans()))
}

/// The levels the installed subscriber logs access lines at.
fn access_levels() -> Vec<tracing::Level> {
    use tracing::Level;
    let enabled = [
        (Level::INFO, tracing::enabled!(target: ACCESS_TARGET, Level::INFO)),
        (Level::WARN, tracing::enabled!(target: ACCESS_TARGET, Level::WARN)),
        (Level::ERROR, tracing::enabled!(target: ACCESS_TARGET, Level::ERROR)),
    ];
    enabled.into_iter().filter_map(|(level, on)| on.then_some(level)).collect()
}

/// Every event but spans: the log lines do not repeat them.
fn not_spans() -> Targets {
    Targets::new()
        .with_default(tracing::Level::TRACE)
        .with_target(SPAN_TARGET, tracing_subscriber::filter::LevelFilter::OFF)
}

/// The layer that hands spans to `provider`. Its spans are all at info, and its filter says
/// so: a higher level (or none, which counts as `trace`) raises the `log` crate's maximum too,
/// and every `log::trace!` of Wasmtime's would be dispatched only to be filtered out.
fn spans_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry::trace::TracerProvider as _;
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("edgegate"))
        .with_filter(Targets::new().with_target(SPAN_TARGET, tracing::Level::INFO))
}

/// A global filter, under every layer: a span of edgegate's exists only if it is a request's
/// or runs under one. The gateway decides per request (`observe::trace::sampled`) and gives
/// an unsampled one no request span, so none of its spans is built either. (A per-layer
/// filter on the spans layer cannot do this: a span it refuses is still built.) Every other
/// call site is left to the layers, asked once.
///
/// `most` is the most verbose level anything is logged at: the filter says so, or it would
/// raise the `log` crate's maximum to `trace` (see [`spans_layer`]).
fn under_a_request<S>(most: LevelFilter) -> impl Layer<S> + use<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    filter::dynamic_filter_fn(|meta, cx| {
        meta.target() != SPAN_TARGET || meta.name() == "request" || cx.lookup_current().is_some()
    })
    .with_callsite_filter(|meta| match meta.target() {
        SPAN_TARGET => tracing::subscriber::Interest::sometimes(),
        _ => tracing::subscriber::Interest::always(),
    })
    .with_max_level_hint(most.max(LevelFilter::INFO))
}

/// The most verbose level `filter` logs anything at (`trace` when it cannot say).
fn logged_levels(filter: &EnvFilter) -> LevelFilter {
    <EnvFilter as tracing_subscriber::layer::Filter<tracing_subscriber::Registry>>::max_level_hint(
        filter,
    )
    .unwrap_or(LevelFilter::TRACE)
}

/// The OTLP exporter and the runtime it sends from, when an endpoint is configured.
fn exporter() -> anyhow::Result<Option<(SdkTracerProvider, tokio::runtime::Runtime)>> {
    let configured = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
    if !configured {
        return Ok(None);
    }
    let ratio = match std::env::var("OTEL_TRACES_SAMPLER_ARG") {
        Ok(text) => {
            text.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r)).with_context(|| {
                format!("OTEL_TRACES_SAMPLER_ARG={text:?}: want a ratio from 0 to 1")
            })?
        }
        Err(_) => 1.0,
    };
    // Its own thread: export never competes with the gateway's runtime for a worker thread.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("edgegate-otlp")
        .enable_all()
        .build()
        .context("starting the trace exporter's runtime")?;
    let _entered = runtime.enter();
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match protocol()? {
        Protocol::Grpc => builder.with_tonic().build(),
        Protocol::HttpProtobuf => builder.with_http().build(),
    }
    .context("setting up the OTLP exporter")?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        // The ratio is applied by the gateway, before a request's first span: every span
        // that exists is one to export.
        .with_sampler(Sampler::AlwaysOn)
        .with_resource(opentelemetry_sdk::Resource::builder().with_service_name("edgegate").build())
        .build();
    drop(_entered);
    edgegate_host::observe::trace::export_spans(ratio);
    Ok(Some((provider, runtime)))
}

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// OTLP/gRPC (a collector's port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (port 4318): the OpenTelemetry SDKs' default.
    HttpProtobuf,
}

/// The protocol `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, names;
/// HTTP with protobuf when neither is set. Any other value is an error naming the variable,
/// not a silent fallback to a transport the collector may not listen on.
fn protocol() -> anyhow::Result<Protocol> {
    for var in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
        let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) else { continue };
        return match value.to_str() {
            Some("grpc") => Ok(Protocol::Grpc),
            Some("http/protobuf") => Ok(Protocol::HttpProtobuf),
            _ => anyhow::bail!("{var}={value:?}: want `grpc` or `http/protobuf`"),
        };
    }
    Ok(Protocol::HttpProtobuf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_request_span_and_the_spans_under_it_are_built() {
        let provider = SdkTracerProvider::builder().build();
        let logs = fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(EnvFilter::new("info").and(not_spans()));
        let subscriber = tracing_subscriber::registry()
            .with(under_a_request(LevelFilter::INFO))
            .with(logs)
            .with(spans_layer(&provider));
        tracing::subscriber::with_default(subscriber, || {
            let guest = || tracing::info_span!(target: SPAN_TARGET, "guest");
            assert!(guest().is_disabled(), "outside a request (an unsampled one): no span");
            let request = tracing::info_span!(target: SPAN_TARGET, "request");
            assert!(!request.is_disabled());
            let _entered = request.enter();
            assert!(!guest().is_disabled(), "under a request's span");
        });
    }
}
