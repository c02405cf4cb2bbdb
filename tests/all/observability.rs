//! Observability through the real binary: `/metrics` after known traffic, traps and limit hits
//! under their labels, spans at a real OTLP/HTTP receiver with the client's trace id, JSON log
//! lines, and the `server-timing` header.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use crate::support::{Gateway, Reply, get, http, post, runtime_section, serve_http};

/// The client's trace: trace id, parent span id, sampled.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn traceparent(trace_id: &str) -> String {
    format!("00-{trace_id}-{CLIENT_SPAN}-01")
}

/// One `/metrics` scrape: every sample with its labels.
struct Scrape {
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
    text: String,
}

impl Scrape {
    fn of(gw: &Gateway) -> Self {
        let reply = get(gw.admin, "/metrics");
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
        let text = reply.text();
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| parse_sample(l).unwrap_or_else(|| panic!("not a sample: {l:?}")))
            .collect();
        Self { samples, text }
    }

    /// The sum of the samples of `name` whose labels include all of `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, l, _)| {
                n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }

    /// The count of `name` (a histogram) under `labels` in the bucket `le`.
    fn bucket(&self, name: &str, labels: &[(&str, &str)], le: &str) -> f64 {
        let mut labels = labels.to_vec();
        labels.push(("le", le));
        self.sum(&format!("{name}_bucket"), &labels)
    }
}

/// `name{k="v",…} value` or `name value`.
fn parse_sample(line: &str) -> Option<(String, BTreeMap<String, String>, f64)> {
    let (series, value) = line.rsplit_once(' ')?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        v => v.parse().ok()?,
    };
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series.to_owned(), BTreeMap::new(), value));
    };
    let mut labels = BTreeMap::new();
    let mut rest = rest.strip_suffix('}')?;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut chars = after.char_indices();
        let mut text = String::new();
        let end = loop {
            match chars.next()? {
                (_, '\\') => text.push(chars.next()?.1),
                (i, '"') => break i,
                (_, c) => text.push(c),
            }
        };
        labels.insert(key.to_owned(), text);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some((name.to_owned(), labels, value))
}

fn bearer(gw: &Gateway, path: &str, token: &str, headers: &[(&str, &str)]) -> Reply {
    let auth = format!("Bearer {token}");
    let mut all = vec![("Authorization", auth.as_str())];
    all.extend_from_slice(headers);
    http(gw.addr, "GET", path, &all, b"")
}

/// 1 KiB of JSON, as the static-json workload posts.
fn json_body() -> Vec<u8> {
    serde_json::json!({"items": vec!["edgegate"; 100]}).to_string().into_bytes()
}

#[test]
fn metrics_count_known_traffic_by_label_and_bucket() {
    let mut gw = Gateway::demo(&[]);
    let tokens = gw.demo_tokens();
    let before = Scrape::of(&gw);
    assert_eq!(before.sum("edgegate_requests_total", &[]), 0.0, "{}", before.text);

    for _ in 0..3 {
        let reply = post(gw.addr, "/echo", &json_body());
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.header("server-timing"), None, "off by default");
    }
    let traced =
        http(gw.addr, "GET", "/kv/user:1", &[("traceparent", &traceparent(TRACE_ID))], b"");
    assert_eq!(traced.status, 200);
    assert_eq!(get(gw.addr, "/kv/no-such-key").status, 404);
    assert_eq!(get(gw.addr, "/nowhere").error(), "no_route");
    let (audience, token) = &tokens[0];
    assert_eq!(bearer(&gw, "/auth/orders", token, &[]).status, 200);

    let m = Scrape::of(&gw);
    let echo = [("route", "echo"), ("worker", "echo-json")];
    let echo_ok = [echo[0], echo[1], ("status", "200"), ("source", "-")];
    assert_eq!(m.sum("edgegate_requests_total", &echo_ok), 3.0, "{}", m.text);
    assert_eq!(m.sum("edgegate_requests_total", &echo), 3.0);
    assert_eq!(m.sum("edgegate_request_duration_seconds_count", &echo_ok), 3.0);
    assert_eq!(m.bucket("edgegate_request_duration_seconds", &echo_ok, "+Inf"), 3.0);
    // The worker answered its own 404: not an error of the gateway's.
    let kv = [("route", "kv"), ("worker", "kv-lookup")];
    assert_eq!(m.sum("edgegate_requests_total", &[kv[0], kv[1], ("status", "200")]), 1.0);
    assert_eq!(m.sum("edgegate_requests_total", &[kv[0], ("status", "404"), ("source", "-")]), 1.0);
    let unrouted = [("route", "-"), ("worker", "-"), ("status", "404"), ("source", "client")];
    assert_eq!(m.sum("edgegate_requests_total", &unrouted), 1.0);
    assert_eq!(m.sum("edgegate_requests_total", &[]), 7.0);

    // Per-worker guest costs. echo-json's memory is its two initial pages (128 KiB) and never
    // grows for 1 KiB: every sample is in the 131072 bucket, none in the one below.
    let w = [("worker", "echo-json")];
    for histogram in ["edgegate_instantiate_duration_seconds", "edgegate_guest_cpu_seconds"] {
        assert_eq!(m.sum(&format!("{histogram}_count"), &w), 3.0, "{histogram}");
        assert!(m.sum(&format!("{histogram}_sum"), &w) > 0.0, "{histogram}");
    }
    assert_eq!(m.bucket("edgegate_guest_memory_peak_bytes", &w, "65536"), 0.0, "{}", m.text);
    assert_eq!(m.bucket("edgegate_guest_memory_peak_bytes", &w, "131072"), 3.0);
    assert_eq!(m.sum("edgegate_guest_memory_peak_bytes_sum", &w), 3.0 * 131072.0);
    assert_eq!(m.sum("edgegate_guest_memory_peak_bytes_count", &[("worker", "kv-lookup")]), 2.0);
    // Buckets double from 10 µs up past 10 s.
    assert!(m.text.contains(r#"worker="echo-json",le="0.00001"}"#), "{}", m.text);
    assert!(m.text.contains(r#"worker="echo-json",le="10.48576"}"#));

    let get_ok = [("backend", "memory"), ("op", "get"), ("result", "ok")];
    assert_eq!(m.sum("edgegate_kv_operations_total", &get_ok), 2.0);
    assert_eq!(m.sum("edgegate_kv_operations_total", &[("result", "error")]), 0.0);

    let upstream = [("upstream", audience.as_str())];
    assert_eq!(m.sum("edgegate_upstream_duration_seconds_count", &upstream), 1.0);
    assert_eq!(m.sum("edgegate_upstream_connections", &upstream), 1.0, "kept alive in the pool");
    assert_eq!(m.sum("edgegate_upstream_in_flight", &upstream), 0.0);
    assert_eq!(m.sum("edgegate_upstream_errors_total", &[]), 0.0);

    // Each worker's code loads once: all six at start when their checks compiled them (a
    // fresh module cache), else the three requested, each by its first request.
    let loads = m.sum("edgegate_worker_code_total", &[("event", "load")]);
    assert!(loads == 6.0 || loads == 3.0, "{loads}");
    assert_eq!(m.sum("edgegate_module_cache_total", &[]), loads);
    assert_eq!(m.sum("edgegate_worker_code_resident", &[]), loads);
    assert_eq!(m.sum("edgegate_worker_code_total", &[("event", "eviction")]), 0.0);
    // Six requests reached a worker; those that did not load its code found it resident.
    let loaded_by_requests = if loads == 3.0 { 3.0 } else { 0.0 };
    assert_eq!(m.sum("edgegate_worker_code_total", &[("event", "hit")]), 6.0 - loaded_by_requests);
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(m.sum("edgegate_build_info", &version), 1.0);
    for idle in [
        "edgegate_requests_in_flight",
        "edgegate_requests_queued",
        "edgegate_instance_slots_in_use",
    ] {
        assert_eq!(m.sum(idle, &[]), 0.0, "{idle}");
    }
    assert_eq!(m.sum("edgegate_instance_slots", &[]), 256.0);
    assert!(m.text.contains("# TYPE edgegate_request_duration_seconds histogram"));

    // The text access log carries the client's trace id, although no spans are exported.
    let (status, stderr) = gw.stop();
    assert!(status.success(), "{stderr}");
    let line = stderr.lines().find(|l| l.contains(TRACE_ID)).expect("the traced request's line");
    assert!(line.contains("edgegate::access") && line.contains("route=\"kv\""), "{line}");
}

/// The hostile guest under its default limits, forwarding to an upstream that is down, with
/// `server-timing` on.
fn hostile_config() -> String {
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    format!(
        r#"
        [server]
        server_timing = true

        {runtime}
        [workers.hostile]
        module = "{hostile}"
        upstreams = ["nowhere"]

        [[routes]]
        prefix = "/h"
        worker = "hostile"

        [upstreams.nowhere]
        url = "http://{down}"
        "#,
        runtime = runtime_section(),
        hostile = edgegate_guests::HOSTILE,
    )
}

#[test]
fn a_perf_map_names_guest_functions_only_when_asked() {
    let map_of = |gw: &Gateway| std::path::PathBuf::from(format!("/tmp/perf-{}.map", gw.pid()));
    let plain = Gateway::start(&hostile_config());
    assert_eq!(get(plain.addr, "/h/ok").status, 200);
    assert!(!map_of(&plain).exists(), "no perf map unless EDGEGATE_PERF_MAP=1");

    let mapped = Gateway::start_with(&hostile_config(), &[], &[("EDGEGATE_PERF_MAP", "1")]);
    assert_eq!(get(mapped.addr, "/h/ok").status, 200);
    let path = map_of(&mapped);
    let map = std::fs::read_to_string(&path).expect("EDGEGATE_PERF_MAP=1 writes /tmp/perf-PID.map");
    let _ = std::fs::remove_file(&path);
    // `perf` reads "START SIZE NAME" lines; the hostile guest's entry point must be named.
    let named: Vec<&str> = map.lines().filter(|l| l.contains("edgegate_v1_handle")).collect();
    assert!(
        !named.is_empty(),
        "no guest function named in {} lines:\n{map:.2000}",
        map.lines().count()
    );
    assert!(named.iter().all(|l| l.split(' ').count() >= 3), "{named:?}");
}

#[test]
fn traps_and_limit_hits_are_counted_under_their_labels() {
    let gw = Gateway::start(&hostile_config());
    for (path, status) in [
        ("/h/trap", 500),
        ("/h/trap", 500),
        ("/h/panic", 500),
        ("/h/recurse", 500),
        ("/h/loop", 503),
        ("/h/hostcalls", 503),
        ("/h/grow", 500),
        ("/h/forward", 502),
    ] {
        assert_eq!(get(gw.addr, path).status, status, "{path}");
    }
    let m = Scrape::of(&gw);
    let traps = |kind| m.sum("edgegate_traps_total", &[("worker", "hostile"), ("kind", kind)]);
    assert_eq!((traps("worker_trap"), traps("stack_overflow")), (3.0, 1.0), "{}", m.text);
    let hits =
        |limit| m.sum("edgegate_limit_hits_total", &[("worker", "hostile"), ("limit", limit)]);
    assert_eq!((hits("cpu"), hits("hostcalls"), hits("memory")), (1.0, 1.0, 1.0), "{}", m.text);
    assert_eq!(m.sum("edgegate_limit_hits_total", &[]), 3.0);
    let worker_errors = [("worker", "hostile"), ("source", "worker")];
    assert_eq!(m.sum("edgegate_requests_total", &worker_errors), 7.0);
    let failed = [("route", "routes[0]"), ("status", "502"), ("source", "upstream")];
    assert_eq!(m.sum("edgegate_requests_total", &failed), 1.0);
    let connect = [("upstream", "nowhere"), ("kind", "connect")];
    assert_eq!(m.sum("edgegate_upstream_errors_total", &connect), 1.0);
    // Every request got an instance, so every one has a CPU and a memory sample.
    assert_eq!(m.sum("edgegate_guest_cpu_seconds_count", &[("worker", "hostile")]), 8.0);
    assert_eq!(m.sum("edgegate_guest_memory_peak_bytes_count", &[("worker", "hostile")]), 8.0);
}

/// The durations of a `server-timing` value, by name.
fn server_timing(reply: &Reply) -> HashMap<String, f64> {
    let value = reply.header("server-timing").expect("a server-timing header");
    value
        .split(", ")
        .map(|metric| {
            let (name, dur) = metric.split_once(";dur=").unwrap_or_else(|| panic!("{value}"));
            (name.to_owned(), dur.parse().unwrap_or_else(|_| panic!("{value}")))
        })
        .collect()
}

#[test]
fn server_timing_names_the_stages_a_request_reached() {
    let gw = Gateway::start(&hostile_config());
    // The first request may load the worker's code (the module cache recorded its check, so
    // start-up did not compile it): then it says so.
    let first = server_timing(&get(gw.addr, "/h/ok"));
    assert!(first.keys().all(|k| ["load", "instantiate", "guest"].contains(&k.as_str())));
    let ok = server_timing(&get(gw.addr, "/h/ok"));
    assert_eq!(ok.keys().len(), 2, "resident now: {ok:?}");
    assert!(ok["instantiate"] >= 0.0 && ok["guest"] >= 0.0, "{ok:?}");
    let forwarded = server_timing(&get(gw.addr, "/h/forward"));
    assert_eq!(forwarded.keys().len(), 3, "{forwarded:?}");
    assert!(forwarded.contains_key("upstream"), "{forwarded:?}");
    // A request that never reached a guest has nothing to time.
    let unrouted = get(gw.addr, "/elsewhere");
    assert_eq!((unrouted.status, unrouted.header("server-timing")), (404, None));
}

/// An OTLP/HTTP receiver on loopback: every span it is sent, on a channel.
fn otlp_receiver() -> (String, mpsc::Receiver<Span>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let addr = serve_http(move |seen, body| {
        assert_eq!(seen.request_line(), "POST /v1/traces HTTP/1.1");
        assert_eq!(seen.header("content-type"), Some("application/x-protobuf"));
        let export = ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP protobuf");
        let tx = tx.lock().unwrap();
        for resource in export.resource_spans {
            for scope in resource.scope_spans {
                for span in scope.spans {
                    let _ = tx.send(span);
                }
            }
        }
        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
            .to_vec()
    });
    (format!("http://{addr}"), rx)
}

/// An OTLP/gRPC receiver on loopback: the collector's trace service, served by tonic on a
/// thread of its own; every span it is sent, on a channel.
fn otlp_grpc_receiver() -> (String, mpsc::Receiver<Span>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
        TraceService, TraceServiceServer,
    };

    struct Collector(Mutex<mpsc::Sender<Span>>);

    #[tonic::async_trait]
    impl TraceService for Collector {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            let tx = self.0.lock().unwrap();
            for resource in request.into_inner().resource_spans {
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        let _ = tx.send(span);
                    }
                }
            }
            Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
        }
    }

    let (tx, rx) = mpsc::channel();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(Collector(Mutex::new(tx))))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        });
    });
    (format!("http://{addr}"), rx)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match value {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        other => format!("{other:?}"),
    })
}

/// The spans of trace `trace_id`, waiting until its request span has arrived.
fn spans_of(rx: &mpsc::Receiver<Span>, received: &mut Vec<Span>, trace_id: &str) -> Vec<Span> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let done =
        |spans: &[Span]| spans.iter().any(|s| s.name == "request" && hex(&s.trace_id) == trace_id);
    while !done(received) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(span) => received.push(span),
            Err(_) => panic!("no request span of trace {trace_id}; received: {received:#?}"),
        }
    }
    received.iter().filter(|s| hex(&s.trace_id) == trace_id).cloned().collect()
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        panic!("no {name:?} span in {names:?}")
    })
}

#[test]
fn spans_reach_an_otlp_receiver_under_the_clients_trace_and_logs_are_json() {
    let (endpoint, rx) = otlp_receiver();
    // Ratio 0: only requests whose client sampled their trace are exported.
    let mut gw = Gateway::demo_with(
        &["--log-format", "json"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
        ],
    );
    let tokens = gw.demo_tokens();
    let client = traceparent(TRACE_ID);
    let reply = bearer(&gw, "/auth/orders", &tokens[0].1, &[("traceparent", &client)]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let upstream_saw = reply.json()["headers"]["traceparent"].as_str().unwrap().to_owned();
    let kv_trace = "0af7651916cd43dd8448eb211c80319c";
    let kv = http(gw.addr, "GET", "/kv/user:2", &[("traceparent", &traceparent(kv_trace))], b"");
    assert_eq!(kv.status, 200);
    assert_eq!(post(gw.addr, "/echo", &json_body()).status, 200, "an unsampled request");

    let mut received = Vec::new();
    let auth = spans_of(&rx, &mut received, TRACE_ID);
    let request = named(&auth, "request");
    assert_eq!(hex(&request.parent_span_id), CLIENT_SPAN, "a child of the client's span");
    assert_eq!(request.kind, 2, "SPAN_KIND_SERVER");
    for (key, value) in
        [("route", "auth"), ("worker", "auth-router"), ("http.response.status_code", "200")]
    {
        assert_eq!(attribute(request, key).as_deref(), Some(value), "{key}: {request:#?}");
    }
    let children: Vec<&str> = auth
        .iter()
        .filter(|s| s.parent_span_id == request.span_id)
        .map(|s| s.name.as_str())
        .collect();
    for child in ["instantiate", "guest", "upstream"] {
        assert!(children.contains(&child), "{child} under the request: {children:?}");
    }
    let guest = named(&auth, "guest");
    let verify = auth.iter().find(|s| s.name == "jwt verify").expect("the jwt hostcall span");
    assert_eq!(verify.parent_span_id, guest.span_id, "hostcalls are inside the guest");
    assert!(attribute(guest, "cpu_us").is_some(), "{guest:#?}");
    // The upstream received the same trace, its parent now the gateway's upstream span.
    let upstream = named(&auth, "upstream");
    let expected = format!("00-{TRACE_ID}-{}-01", hex(&upstream.span_id));
    assert_eq!(upstream_saw, expected);
    assert_eq!(upstream.kind, 3, "SPAN_KIND_CLIENT");

    let kv = spans_of(&rx, &mut received, kv_trace);
    let get = kv.iter().find(|s| s.name == "kv get").expect("the kv hostcall span");
    assert_eq!(get.parent_span_id, named(&kv, "guest").span_id);
    assert_eq!(attribute(get, "hostcall.class").as_deref(), Some("kv"));

    // Stopping flushes what is left; still nothing of the unsampled request.
    let (status, stderr) = gw.stop();
    assert!(status.success(), "{stderr}");
    received.extend(rx.try_iter());
    let traces: std::collections::BTreeSet<String> =
        received.iter().map(|s| hex(&s.trace_id)).collect();
    assert_eq!(traces, [kv_trace.to_owned(), TRACE_ID.to_owned()].into(), "sampled traces only");

    // Every stderr line is a JSON object; each access line names its request and cost.
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let access: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["target"] == "edgegate::access").collect();
    assert_eq!(access.len(), 3, "{stderr}");
    for line in &access {
        assert_eq!(line["request_id"].as_str().map(str::len), Some(16), "{line}");
        assert!(line["cpu_us"].is_u64() && line["memory_peak"].as_u64() > Some(0), "{line}");
    }
    assert_eq!(access[0]["trace_id"], TRACE_ID);
    assert_eq!(access[1]["trace_id"], kv_trace);
    // The request that started its trace at the gateway was not sampled: no spans, no trace.
    assert_eq!(access[2]["trace_id"], "-", "{}", access[2]);
    assert_eq!(access[0]["route"], "auth");
}

#[test]
fn spans_reach_an_otlp_grpc_receiver_when_the_protocol_says_grpc() {
    let (endpoint, rx) = otlp_grpc_receiver();
    let gw = Gateway::demo_with(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let kv = http(gw.addr, "GET", "/kv/user:2", &[("traceparent", &traceparent(TRACE_ID))], b"");
    assert_eq!(kv.status, 200);
    let mut received = Vec::new();
    let spans = spans_of(&rx, &mut received, TRACE_ID);
    let request = named(&spans, "request");
    assert_eq!(hex(&request.parent_span_id), CLIENT_SPAN, "a child of the client's span");
    assert_eq!(attribute(request, "worker").as_deref(), Some("kv-lookup"));
    let kv_get = spans.iter().find(|s| s.name == "kv get").expect("the kv hostcall span");
    assert_eq!(kv_get.parent_span_id, named(&spans, "guest").span_id);
    // A trace that starts at the gateway (ratio 1 by default) has its whole tree too.
    assert_eq!(get(gw.addr, "/kv/user:3").status, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    let root = loop {
        if let Some(root) =
            received.iter().find(|s| s.name == "request" && hex(&s.trace_id) != TRACE_ID)
        {
            break root.clone();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        received.push(rx.recv_timeout(left).expect("the gateway's own trace"));
    };
    assert!(root.parent_span_id.is_empty(), "a root: {root:#?}");
    let own = spans_of(&rx, &mut received, &hex(&root.trace_id));
    assert_eq!(named(&own, "guest").parent_span_id, root.span_id, "{own:#?}");
}

#[test]
fn an_unknown_otlp_protocol_is_an_error_naming_the_variable() {
    for (var, value) in [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "gprc"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgegate"))
            .args(["check", "--config", "/nonexistent/edgegate.toml"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
            .env(var, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("{var}=\"{value}\": want `grpc` or `http/protobuf`")),
            "{stderr}"
        );
    }
}

/// An upstream's answer is streamed, and its access line written when its body ends, with
/// the bytes it carried: a body that ends at once (a 204, a HEAD's) is whole, not cut; one the
/// upstream stalls short of its length is cut off at the upstream's `idle_timeout` and says
/// `cut = "upstream_body"`.
#[test]
fn a_streamed_answer_is_logged_when_its_body_ends_with_what_it_carried() {
    let origin = serve_http(|seen, _| {
        let line = seen.request_line().to_owned();
        match line.split_whitespace().nth(1).unwrap_or("") {
            "/empty" => b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n".to_vec(),
            "/broken" => {
                b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\nonly this"
                    .to_vec()
            }
            _ => b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello".to_vec(),
        }
    });
    let config = format!(
        "[upstreams.origin]\nurl = \"http://{origin}\"\nidle_timeout = \"1s\"\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"origin\"\n"
    );
    let mut gw = Gateway::start_with(&config, &[], &[("EDGEGATE_LOG_FORMAT", "json")]);
    assert_eq!(http(gw.addr, "GET", "/whole", &[], b"").text(), "hello");
    assert_eq!(http(gw.addr, "GET", "/empty", &[], b"").status, 204);
    let head = std::process::Command::new("curl")
        .args(["-sS", "-I", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://{}/whole", gw.addr))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&head.stdout), "200");
    let _ = std::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null"])
        .arg(format!("http://{}/broken", gw.addr))
        .output();
    let (_, stderr) = gw.stop();
    let access: Vec<serde_json::Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["target"] == "edgegate::access")
        .collect();
    let line = |method: &str, path: &str| {
        let found = access.iter().find(|l| l["method"] == method && l["path"] == path);
        found.unwrap_or_else(|| panic!("{method} {path}: {access:?}")).clone()
    };
    let told = |l: &serde_json::Value| {
        (l["bytes_out"].as_u64().unwrap(), l["cut"].as_str().unwrap().to_owned())
    };
    assert_eq!(told(&line("GET", "/whole")), (5, "-".to_owned()));
    assert_eq!(told(&line("GET", "/empty")), (0, "-".to_owned()));
    assert_eq!(told(&line("HEAD", "/whole")), (0, "-".to_owned()));
    assert_eq!(told(&line("GET", "/broken")), (9, "upstream_body".to_owned()));
}
