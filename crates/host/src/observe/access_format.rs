//! The access line, formatted without `core::fmt` per field: [`AccessFormat`] writes each
//! `edgegate::access` event itself, byte for byte the line `tracing`'s own text or JSON
//! formatter writes, and hands every other event to that formatter. Strings that need no
//! escaping are copied as they are, numbers go through `itoa`, and the date and time of the
//! second are formatted once per second and thread.
//!
//! A line with a value that needs escaping, and every line on a terminal (in colour), is
//! formatted by `tracing`'s formatter after all.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The access log's target.
pub const ACCESS_TARGET: &str = "edgegate::access";

/// Formats access lines itself, in text or JSON, and any other event as `inner` does.
#[derive(Debug)]
pub struct AccessFormat<F> {
    inner: F,
    json: bool,
}

impl<F> AccessFormat<F> {
    /// Access lines in text (`json: false`) or JSON, beside `inner`, the same format's
    /// formatter, for every other event.
    pub fn new(inner: F, json: bool) -> Self {
        Self { inner, json }
    }
}

impl<S, N, F> FormatEvent<S, N> for AccessFormat<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        if metadata.target() != ACCESS_TARGET || writer.has_ansi_escapes() {
            return self.inner.format_event(ctx, writer, event);
        }
        let line = LINE.with(|line| {
            let mut line = line.borrow_mut();
            line.clear();
            let level = metadata.level().as_str();
            if self.json {
                line.push_str("{\"timestamp\":\"");
                timestamp(&mut line);
                line.push_str("\",\"level\":\"");
                line.push_str(level);
                line.push('"');
            } else {
                timestamp(&mut line);
                line.push_str(&"  "[..(6 - level.len()).min(2)]);
                line.push_str(level);
                line.push(' ');
                line.push_str(ACCESS_TARGET);
                line.push(':');
            }
            let mut fields = Fields { line: &mut line, json: self.json, plain: true };
            event.record(&mut fields);
            let plain = fields.plain;
            if self.json {
                line.push_str(",\"target\":\"");
                line.push_str(ACCESS_TARGET);
                line.push_str("\"}");
            }
            line.push('\n');
            plain.then(|| writer.write_str(&line))
        });
        match line {
            Some(written) => written,
            None => self.inner.format_event(ctx, writer, event),
        }
    }
}

thread_local! {
    static LINE: RefCell<String> = RefCell::new(String::with_capacity(512));
    /// The second last formatted, and its `YYYY-MM-DDTHH:MM:SS`.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// Writes the fields of an access event: ` name=value` (text) or `,"name":value` (JSON).
/// `plain` turns false at a string that needs escaping.
struct Fields<'a> {
    line: &'a mut String,
    json: bool,
    plain: bool,
}

impl Fields<'_> {
    fn name(&mut self, field: &Field) {
        if self.json {
            self.line.push_str(",\"");
            self.line.push_str(field.name());
            self.line.push_str("\":");
        } else {
            self.line.push(' ');
            self.line.push_str(field.name());
            self.line.push('=');
        }
    }

    fn string(&mut self, value: &str) {
        // What `{:?}` (text) and serde_json (JSON) would write unchanged between quotes.
        let unescaped = if self.json {
            value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
        } else {
            value.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        };
        self.plain &= unescaped;
        self.line.push('"');
        self.line.push_str(value);
        self.line.push('"');
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.name(field);
        self.string(value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.name(field);
        self.line.push_str(itoa::Buffer::new().format(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.name(field);
        self.line.push_str(itoa::Buffer::new().format(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.name(field);
        self.line.push_str(if value { "true" } else { "false" });
    }

    /// `%value` fields (the request id, the method): their `Display`, a string in JSON.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.name(field);
        if self.json {
            let start = self.line.len();
            let _ = write!(self.line, "{value:?}");
            let text = self.line.split_off(start);
            self.string(&text);
        } else {
            let _ = write!(self.line, "{value:?}");
        }
    }
}

/// Appends the time now as `tracing`'s timer writes it: `2026-12-06T12:45:46.148051Z`.
fn timestamp(line: &mut String) {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (secs, micros) = (since.as_secs(), since.subsec_micros());
    SECOND.with(|second| {
        let mut second = second.borrow_mut();
        if second.0 != secs {
            second.1.clear();
            date_time(&mut second.1, secs);
            second.0 = secs;
        }
        line.push_str(&second.1);
    });
    line.push('.');
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(micros);
    line.push_str(&"000000"[digits.len()..]);
    line.push_str(digits);
    line.push('Z');
}

/// `YYYY-MM-DDTHH:MM:SS` of `secs` since the epoch (UTC; Howard Hinnant's civil-from-days).
fn date_time(out: &mut String, secs: u64) {
    let days = (secs / 86_400) as i64;
    let in_day = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60
    );
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

    /// An access event as `access::log` emits it, with `path` and `detail` given.
    fn emit(level: tracing::Level, path: &str, detail: &str) {
        let id = edgegate_runtime::RequestId(0x1f2e3d4c5b6a7988);
        let method = http::Method::GET;
        macro_rules! line {
            ($level:expr) => {
                tracing::event!(
                    target: "edgegate::access", $level,
                    request_id = %id, trace_id = "-", %method, path, route = "kv",
                    target = "-", worker = "kv-lookup", status = 200u16, duration_us = 1047u64,
                    cpu_us = 0u64, memory_peak = 131072u64, source = "-", error = "-", detail,
                )
            };
        }
        match level {
            tracing::Level::INFO => line!(tracing::Level::INFO),
            tracing::Level::WARN => line!(tracing::Level::WARN),
            _ => line!(tracing::Level::ERROR),
        }
    }

    /// The line `tracing`'s formatter writes, and ours, each without its timestamp.
    fn both(json: bool, level: tracing::Level, path: &str, detail: &str) -> (String, String) {
        let run = |fast: bool| {
            let buffer = Buffer::default();
            let layer = tracing_subscriber::fmt().with_writer(buffer.clone()).with_ansi(false);
            let dispatch = if json {
                let layer =
                    layer.json().flatten_event(true).with_current_span(false).with_span_list(false);
                if fast {
                    tracing::Dispatch::new(
                        layer.map_event_format(|f| AccessFormat::new(f, true)).finish(),
                    )
                } else {
                    tracing::Dispatch::new(layer.finish())
                }
            } else if fast {
                tracing::Dispatch::new(
                    layer.map_event_format(|f| AccessFormat::new(f, false)).finish(),
                )
            } else {
                tracing::Dispatch::new(layer.finish())
            };
            tracing::dispatcher::with_default(&dispatch, || emit(level, path, detail));
            let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
            // The timestamps differ by the microseconds between the two runs.
            let cut =
                if json { text.find("\",\"level\"").unwrap() } else { text.find(' ').unwrap() };
            let stamp = if json { &text[14..cut] } else { &text[..cut] };
            assert_eq!(stamp.len(), 27, "{text}");
            text[cut..].to_owned()
        };
        (run(false), run(true))
    }

    #[test]
    fn access_lines_are_the_lines_tracing_writes() {
        for json in [false, true] {
            for level in [tracing::Level::INFO, tracing::Level::WARN, tracing::Level::ERROR] {
                for (path, detail) in [
                    ("/kv/user:1", ""),
                    ("/a b", "worker `w` trapped: unreachable"),
                    ("/quote\"d", "a \\ backslash"),
                    ("/caf\u{e9}", "line\nbreak\ttab \u{7f} \u{200b}"),
                ] {
                    let (tracing, ours) = both(json, level, path, detail);
                    assert_eq!(ours, tracing, "json: {json}, {level}");
                }
            }
        }
    }

    #[test]
    fn the_date_and_time_are_the_civil_ones() {
        // The epoch, a leap day, 2024-02-29 12:00, this year, and the last second of 2099.
        for secs in [0, 951_782_400, 1_709_208_000, 1_796_472_000, 4_102_444_799] {
            let mut ours = String::new();
            date_time(&mut ours, secs);
            assert_eq!(ours, counted(secs), "{secs}");
        }
    }

    /// The civil date by counting days, the slow way.
    fn counted(secs: u64) -> String {
        let (mut year, mut days) = (1970, secs / 86_400);
        let leap =
            |y: u64| y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
        while days >= if leap(year) { 366 } else { 365 } {
            days -= if leap(year) { 366 } else { 365 };
            year += 1;
        }
        let lengths =
            [31, if leap(year) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let mut month = 0;
        while days >= lengths[month] {
            days -= lengths[month];
            month += 1;
        }
        let s = secs % 86_400;
        format!(
            "{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            month + 1,
            days + 1,
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    }
}
