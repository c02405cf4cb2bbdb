//! The access log: one line per request (target `edgegate::access`), at a level set by who
//! failed, and the `server-timing` header, both from what the request did ([`Logged`]).

use std::time::Duration;

use edgegate_runtime::{RequestId, Usage};
use tracing::Level;

use crate::error::{RequestError, Source};
use crate::listen::conn::ConnInfo;
use crate::observe::access_line::{self, ACCESS_TARGET, Line};
use crate::observe::metrics::RouteMetrics;

/// What one request did, kept for its log line, metrics and `server-timing`.
#[derive(Default)]
pub(crate) struct Logged<'a> {
    pub(crate) route: Option<&'a str>,
    pub(crate) worker: Option<&'a str>,
    /// The short form of the worker's module digest: which version served.
    pub(crate) digest: Option<&'a str>,
    pub(crate) upstream: Option<&'a str>,
    pub(crate) metrics: Option<&'a RouteMetrics>,
    pub(crate) usage: Usage,
    /// Time to the upstream's response head.
    pub(crate) upstream_time: Option<Duration>,
    /// The split target chosen, on a split route.
    pub(crate) target: Option<&'a str>,
    /// The tenant whose route it is.
    pub(crate) tenant: Option<&'a str>,
    /// Request body bytes read.
    pub(crate) request_bytes: u64,
    /// Response body bytes sent: known when the answer has been sent.
    pub(crate) response_bytes: u64,
    /// Why the answer was cut off after its head was sent, if it was: the code of the limit
    /// or failure that cut it (`response_too_large`, `deadline_exceeded`, `trap`, …),
    /// `upstream_body`, or `client_closed` for a client that went away first.
    pub(crate) cut: Option<&'a str>,
}

/// One request's access log line.
pub(crate) struct Access<'a> {
    pub(crate) id: RequestId,
    pub(crate) trace_id: Option<&'a str>,
    pub(crate) method: &'a http::Method,
    pub(crate) path: &'a str,
    pub(crate) logged: &'a Logged<'a>,
    pub(crate) conn: ConnInfo,
    pub(crate) status: u16,
    pub(crate) elapsed: Duration,
    pub(crate) error: Option<&'a RequestError>,
}

/// One line per request, at a level set by who failed: info for success and client errors,
/// warn for workers and upstreams, error for the host. Written straight into the log queue
/// when the process set that up ([`access_line::write`]), else as a `tracing` event.
pub(crate) fn log(access: &Access<'_>) {
    let Access { id, method, path, logged, status, error, .. } = *access;
    let (tls, alpn) = access.conn.tls.map_or(("-", "-"), |t| (t.version, t.alpn));
    let line = Line {
        request_id: id,
        trace_id: access.trace_id.unwrap_or("-"),
        method: method.as_str(),
        path,
        route: logged.route.unwrap_or("-"),
        target: logged.target.unwrap_or("-"),
        tenant: logged.tenant.unwrap_or("-"),
        worker: logged.worker.unwrap_or("-"),
        digest: logged.digest.unwrap_or("-"),
        upstream: logged.upstream.unwrap_or("-"),
        tls,
        alpn,
        status,
        duration_us: access.elapsed.as_micros() as u64,
        cpu_us: logged.usage.cpu.as_micros() as u64,
        memory_peak: logged.usage.memory_peak,
        bytes_in: logged.request_bytes,
        bytes_out: logged.response_bytes,
        cut: logged.cut.unwrap_or("-"),
        source: error.map_or("-", |e| e.kind.source().as_str()),
        error: error.map_or("-", |e| e.kind.code()),
        detail: error.map_or("", |e| e.detail.as_str()),
    };
    let level = match error.map(|e| e.kind.source()) {
        // An answer cut short is a failure, whatever its status said.
        None if logged.cut.is_some_and(|c| c != "client_closed") => Level::WARN,
        None | Some(Source::Client) => Level::INFO,
        Some(Source::Worker | Source::Upstream) => Level::WARN,
        Some(Source::Host) => Level::ERROR,
    };
    if !access_line::write(level, &line) {
        event(level, &line);
    }
}

/// `line` as a `tracing` event (target [`ACCESS_TARGET`]).
fn event(level: Level, line: &Line<'_>) {
    macro_rules! event {
        ($level:expr) => {
            tracing::event!(
                target: ACCESS_TARGET,
                $level,
                request_id = %line.request_id,
                trace_id = line.trace_id,
                method = %line.method,
                path = line.path,
                route = line.route,
                target = line.target,
                tenant = line.tenant,
                worker = line.worker,
                digest = line.digest,
                upstream = line.upstream,
                tls = line.tls,
                alpn = line.alpn,
                status = line.status,
                duration_us = line.duration_us,
                cpu_us = line.cpu_us,
                memory_peak = line.memory_peak,
                bytes_in = line.bytes_in,
                bytes_out = line.bytes_out,
                cut = line.cut,
                source = line.source,
                error = line.error,
                detail = line.detail,
            )
        };
    }
    match level {
        Level::INFO => event!(Level::INFO),
        Level::WARN => event!(Level::WARN),
        _ => event!(Level::ERROR),
    }
}

/// The `server-timing` value (durations in milliseconds): `load` (when the worker's code was
/// not resident), `instantiate`, `guest` and `upstream`, those the request reached; `None` if
/// it reached none.
pub(crate) fn server_timing(logged: &Logged<'_>) -> Option<String> {
    let usage = &logged.usage;
    let mut parts = Vec::with_capacity(4);
    if !usage.load.is_zero() {
        parts.push(("load", usage.load));
    }
    if !usage.instantiate.is_zero() {
        parts.push(("instantiate", usage.instantiate));
        parts.push(("guest", usage.guest));
    }
    if let Some(upstream) = logged.upstream_time {
        parts.push(("upstream", upstream));
    }
    if parts.is_empty() {
        return None;
    }
    let parts: Vec<String> = parts
        .into_iter()
        .map(|(name, d)| format!("{name};dur={:.3}", d.as_secs_f64() * 1000.0))
        .collect();
    Some(parts.join(", "))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Self;
        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    fn line<'a>(path: &'a str, detail: &'a str) -> Line<'a> {
        Line {
            request_id: RequestId(0x0f2e3d4c5b6a7988),
            trace_id: "-",
            method: "GET",
            path,
            route: "kv",
            target: "-",
            tenant: "-",
            worker: "kv-lookup",
            digest: "sha256:1f2e3d4c",
            upstream: "-",
            tls: "TLSv1.3",
            alpn: "h2",
            status: 200,
            duration_us: 1047,
            cpu_us: 0,
            memory_peak: 131072,
            bytes_in: 0,
            bytes_out: 256,
            cut: "-",
            source: "-",
            error: "-",
            detail,
        }
    }

    /// `line` as `tracing`'s formatter writes its event, without the timestamp.
    fn by_tracing(json: bool, level: Level, line: &Line<'_>) -> String {
        let buffer = Buffer::default();
        let layer = tracing_subscriber::fmt().with_writer(buffer.clone()).with_ansi(false);
        let dispatch = if json {
            let layer =
                layer.json().flatten_event(true).with_current_span(false).with_span_list(false);
            tracing::Dispatch::new(layer.finish())
        } else {
            tracing::Dispatch::new(layer.finish())
        };
        tracing::dispatcher::with_default(&dispatch, || event(level, line));
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        untimed(json, &text)
    }

    /// `text` from its level on; the timestamp checked for its length only, as two runs'
    /// differ.
    fn untimed(json: bool, text: &str) -> String {
        let cut = if json { text.find("\",\"level\"").unwrap() } else { text.find(' ').unwrap() };
        let stamp = if json { &text[14..cut] } else { &text[..cut] };
        assert_eq!(stamp.len(), 27, "{text}");
        text[cut..].to_owned()
    }

    #[test]
    fn access_lines_are_the_lines_tracing_writes() {
        for json in [false, true] {
            for level in [Level::INFO, Level::WARN, Level::ERROR] {
                for (path, detail) in [
                    ("/kv/user:1", ""),
                    ("/a b", "worker `w` trapped: unreachable"),
                    ("/quote\"d", "a \\ backslash"),
                    ("/caf\u{e9}", "line\nbreak\ttab \u{7f} \u{200b}"),
                ] {
                    let line = line(path, detail);
                    let mut ours = String::new();
                    let plain = access_line::format(&mut ours, json, level, &line);
                    let theirs = by_tracing(json, level, &line);
                    // A value that needs escaping is left to tracing: it must say so.
                    let escapes = theirs.contains('\\') || (!json && !theirs.is_ascii());
                    assert_eq!(plain, !escapes, "json: {json}, {theirs}");
                    if plain {
                        assert_eq!(untimed(json, &ours), theirs, "json: {json}, {level}");
                    }
                }
            }
        }
    }
}
