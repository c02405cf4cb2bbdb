//! The access line, written straight into the log queue: `write` formats a request's
//! `Line` itself, byte for byte the line `tracing`'s own text or JSON formatter would write
//! for the same event, and hands it to the [`LogWriter`] after one level check. The event's
//! dispatch (the subscriber, its layers and filters, a visitor per field) is skipped, and so
//! is `core::fmt` per field: strings that need no escaping are copied as they are, numbers go
//! through `itoa`, and the date and time of the second are formatted once per second and
//! thread.
//!
//! The process turns this on once its subscriber is in place ([`install`]). Until then, on a
//! terminal (in colour), under a filter that depends on spans, and for a line with a value
//! that needs escaping, `write` answers `false` and the caller emits the `tracing` event
//! after all.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use edgegate_runtime::RequestId;
use tracing::Level;

use crate::observe::log_writer::LogWriter;

/// The access log's target.
pub const ACCESS_TARGET: &str = "edgegate::access";

/// One request's access line, its fields in the order they are written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub(crate) request_id: RequestId,
    pub(crate) trace_id: &'a str,
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) route: &'a str,
    pub(crate) target: &'a str,
    pub(crate) tenant: &'a str,
    pub(crate) worker: &'a str,
    pub(crate) digest: &'a str,
    pub(crate) upstream: &'a str,
    pub(crate) tls: &'a str,
    pub(crate) alpn: &'a str,
    pub(crate) status: u16,
    pub(crate) duration_us: u64,
    pub(crate) cpu_us: u64,
    pub(crate) memory_peak: u64,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) cut: &'a str,
    pub(crate) source: &'a str,
    pub(crate) error: &'a str,
    pub(crate) detail: &'a str,
}

/// Where access lines go once [`install`]ed: the queue, the format, and the levels the
/// process's filter lets through for [`ACCESS_TARGET`].
#[derive(Debug)]
struct Direct {
    writer: LogWriter,
    json: bool,
    levels: Vec<Level>,
}

static DIRECT: OnceLock<Direct> = OnceLock::new();

/// From now on, access lines are written to `writer` in text or JSON (`json`) at `levels`
/// (those the process's filter allows for [`ACCESS_TARGET`]; others are not written), without
/// going through `tracing`. Call it once the subscriber is set up, and only where that
/// subscriber would write the same lines: not in colour, and not under a filter that depends
/// on the current span. A second call changes nothing.
pub fn install(writer: LogWriter, json: bool, levels: Vec<Level>) {
    let _ = DIRECT.set(Direct { writer, json, levels });
}

/// Writes `line` at `level` if [`install`] was called, answering whether it is done: `true`
/// when written or filtered out, `false` when the caller must emit the `tracing` event (not
/// installed, or a value that needs escaping).
pub(crate) fn write(level: Level, line: &Line<'_>) -> bool {
    let Some(direct) = DIRECT.get() else { return false };
    if !direct.levels.contains(&level) {
        return true;
    }
    LINE.with(|text| {
        let mut text = text.borrow_mut();
        let plain = format(&mut text, direct.json, level, line);
        if plain {
            direct.writer.line(text.as_bytes());
        }
        plain
    })
}

/// Formats `line` into `out` (emptied first) as `tracing`'s formatter would, text or JSON;
/// `false` when a value needs escaping (`out` then holds an unfinished line).
pub(crate) fn format(out: &mut String, json: bool, level: Level, line: &Line<'_>) -> bool {
    out.clear();
    let level = level.as_str();
    if json {
        out.push_str("{\"timestamp\":\"");
        timestamp(out);
        out.push_str("\",\"level\":\"");
        out.push_str(level);
        out.push('"');
    } else {
        timestamp(out);
        out.push_str(&"  "[..(6 - level.len()).min(2)]);
        out.push_str(level);
        out.push(' ');
        out.push_str(ACCESS_TARGET);
        out.push(':');
    }
    let mut fields = Fields { line: out, json, plain: true };
    fields.shown("request_id", std::str::from_utf8(&line.request_id.hex()).unwrap_or("-"));
    fields.string("trace_id", line.trace_id);
    fields.shown("method", line.method);
    fields.string("path", line.path);
    fields.string("route", line.route);
    fields.string("target", line.target);
    fields.string("tenant", line.tenant);
    fields.string("worker", line.worker);
    fields.string("digest", line.digest);
    fields.string("upstream", line.upstream);
    fields.string("tls", line.tls);
    fields.string("alpn", line.alpn);
    fields.number("status", u64::from(line.status));
    fields.number("duration_us", line.duration_us);
    fields.number("cpu_us", line.cpu_us);
    fields.number("memory_peak", line.memory_peak);
    fields.number("bytes_in", line.bytes_in);
    fields.number("bytes_out", line.bytes_out);
    fields.string("cut", line.cut);
    fields.string("source", line.source);
    fields.string("error", line.error);
    fields.string("detail", line.detail);
    let plain = fields.plain;
    if json {
        out.push_str(",\"target\":\"");
        out.push_str(ACCESS_TARGET);
        out.push_str("\"}");
    }
    out.push('\n');
    plain
}

thread_local! {
    static LINE: RefCell<String> = RefCell::new(String::with_capacity(512));
    /// The second last formatted, and its `YYYY-MM-DDTHH:MM:SS`.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// Writes fields: ` name=value` (text) or `,"name":value` (JSON). `plain` turns false at a
/// string that needs escaping.
struct Fields<'a> {
    line: &'a mut String,
    json: bool,
    plain: bool,
}

impl Fields<'_> {
    fn name(&mut self, name: &str) {
        if self.json {
            self.line.push_str(",\"");
            self.line.push_str(name);
            self.line.push_str("\":");
        } else {
            self.line.push(' ');
            self.line.push_str(name);
            self.line.push('=');
        }
    }

    /// A `&str` field: quoted, as its `Debug` (text) or a JSON string.
    fn string(&mut self, name: &str, value: &str) {
        self.name(name);
        self.quoted(value);
    }

    /// A `%value` field: its `Display` as it is (text) or a JSON string.
    fn shown(&mut self, name: &str, value: &str) {
        self.name(name);
        if self.json {
            self.quoted(value);
        } else {
            self.line.push_str(value);
        }
    }

    fn number(&mut self, name: &str, value: u64) {
        self.name(name);
        self.line.push_str(itoa::Buffer::new().format(value));
    }

    fn quoted(&mut self, value: &str) {
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
    use super::*;

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
