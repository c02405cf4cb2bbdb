//! The request path's own metrics, rendered in the Prometheus text format next to the
//! recorder's: histograms of fixed doubling buckets ([`Buckets`]), gauges of one atomic
//! ([`Level`]) and counters of one atomic ([`Count`]), one allocation per series.
//!
//! A series lives as long as something holds it: a route's, a worker's or an upstream's
//! handles, which a configuration's snapshot owns. The registry keeps one reference of its own
//! and drops a series when it holds the last one, when `/metrics` is rendered: so the series of
//! a route, worker version or upstream a reload removed go with it, and a reload that keeps
//! them gets the same series back (their counts carry on). Series made on an event (a status a
//! route first answered, a trap) are held by their owner too ([`Keyed`]).
//!
//! A histogram sample is two relaxed atomic adds into memory the series owns; a gauge step is
//! one. Through the `metrics` facade a sample is a push into `metrics-util`'s epoch-protected
//! list of blocks, folded into buckets at scrape, and a gauge step a compare-and-swap loop on
//! an `f64` plus a generation count: cheap in a hot loop, but end to end the request path's
//! share cost a lightly loaded server a few percent of its CPU per request
//! (docs/observability.md, "Cost"). The exported buckets are the same either way.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

/// Buckets `first`, `2 × first`, …: `bounds` of them, then `+Inf`.
#[derive(Debug)]
pub(crate) struct Scale {
    first: u64,
    bounds: usize,
    /// Recorded units per exported unit (nanoseconds per second, or 1 for bytes).
    per_unit: u64,
}

/// Durations in nanoseconds, exported in seconds: 10 µs to 10.49 s (21 bounds).
pub(crate) const SECONDS: Scale = Scale { first: 10_000, bounds: 21, per_unit: 1_000_000_000 };

/// Sizes in bytes: 64 KiB to 1 GiB (15 bounds).
pub(crate) const BYTES: Scale = Scale { first: 64 << 10, bounds: 15, per_unit: 1 };

/// The most bounds a scale has, plus `+Inf`.
const SLOTS: usize = 22;

/// One series: a count per bucket (not cumulative) and the sum, in recorded units.
#[derive(Debug)]
pub(crate) struct Buckets {
    scale: &'static Scale,
    counts: [AtomicU64; SLOTS],
    sum: AtomicU64,
}

impl Buckets {
    /// A series no scrape sees (for requests that never run a guest, and before install).
    pub(crate) fn detached(scale: &'static Scale) -> Arc<Self> {
        Arc::new(Self { scale, counts: Default::default(), sum: AtomicU64::new(0) })
    }

    /// Records `elapsed`, in a [`SECONDS`] series.
    pub(crate) fn record_time(&self, elapsed: Duration) {
        self.record(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records `value`, in nanoseconds or bytes.
    pub(crate) fn record(&self, value: u64) {
        self.counts[self.scale.index(value)].fetch_add(1, Relaxed);
        self.sum.fetch_add(value, Relaxed);
    }
}

impl Scale {
    /// The bucket of `value`: the first bound at or above it, or `bounds` for `+Inf`.
    fn index(&self, value: u64) -> usize {
        if value <= self.first {
            return 0;
        }
        // For value in (first·2^(i-1), first·2^i], (value - 1) / first is in [2^(i-1), 2^i).
        let i = (u64::BITS - ((value - 1) / self.first).leading_zeros()) as usize;
        i.min(self.bounds)
    }

    fn bound(&self, i: usize) -> String {
        self.exported(self.first << i)
    }

    /// The bounds in exported units, for the recorder's histograms of the same scale.
    pub(crate) fn bounds(&self) -> Vec<f64> {
        (0..self.bounds).map(|i| (self.first << i) as f64 / self.per_unit as f64).collect()
    }

    /// `value`, in recorded units, as the text format writes it in exported units (bytes
    /// stay integers, exact at any size).
    fn exported(&self, value: u64) -> String {
        if self.per_unit == 1 {
            value.to_string()
        } else {
            (value as f64 / self.per_unit as f64).to_string()
        }
    }
}

/// A series' labels, in the order they are written.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// A gauge: a level that requests raise while they hold it ([`Raised`]).
#[derive(Debug, Default)]
pub(crate) struct Level(AtomicI64);

impl Level {
    /// Sets the level (an info gauge's 1 or 0).
    pub(crate) fn set(&self, value: i64) {
        self.0.store(value, Relaxed);
    }

    /// Raises the level by `n` (lowers it, negative).
    pub(crate) fn add(&self, n: i64) {
        self.0.fetch_add(n, Relaxed);
    }
}

/// A counter: one atomic that only grows.
#[derive(Debug, Default)]
pub(crate) struct Count(AtomicU64);

impl Count {
    pub(crate) fn increment(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    /// What it has counted.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Series made on first use under a key, and held here: they live as long as the holder.
#[derive(Debug)]
pub(crate) struct Keyed<K, T>(RwLock<Vec<(K, T)>>);

impl<K, T> Default for Keyed<K, T> {
    fn default() -> Self {
        Self(RwLock::new(Vec::new()))
    }
}

impl<K: PartialEq, T> Keyed<K, T> {
    /// Runs `f` on the series of `key`, made by `make` the first time.
    pub(crate) fn with(&self, key: K, make: impl FnOnce() -> T, f: impl Fn(&T)) {
        let read = self.0.read();
        if let Some((_, series)) = read.iter().find(|(k, _)| *k == key) {
            return f(series);
        }
        drop(read);
        let mut write = self.0.write();
        if let Some((_, series)) = write.iter().find(|(k, _)| *k == key) {
            return f(series);
        }
        let series = make();
        f(&series);
        write.push((key, series));
    }
}

/// A [`Level`] raised by one while this lives.
#[derive(Debug)]
pub(crate) struct Raised<'a>(&'a Level);

impl<'a> Raised<'a> {
    pub(crate) fn new(level: &'a Level) -> Self {
        level.0.fetch_add(1, Relaxed);
        Self(level)
    }
}

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Relaxed);
    }
}

/// A family: its name, help and series by label set.
struct Family<T> {
    name: &'static str,
    help: &'static str,
    /// By label set: a lookup is O(log n) however many workers or routes there are.
    series: BTreeMap<Labels, Arc<T>>,
}

type Families<T> = Mutex<Vec<Family<T>>>;

static HISTOGRAMS: Families<Buckets> = Mutex::new(Vec::new());
static GAUGES: Families<Level> = Mutex::new(Vec::new());
static COUNTERS: Families<Count> = Mutex::new(Vec::new());
/// Counters of nanoseconds, exported in seconds.
static SECONDS_COUNTERS: Families<Count> = Mutex::new(Vec::new());

/// The series of `name` with `labels` in `families`, registered with `new` on first use: a
/// reloaded configuration gets the same series back, so its counts carry on.
fn find_or_add<T>(
    families: &Families<T>,
    name: &'static str,
    help: &'static str,
    labels: Labels,
    new: impl FnOnce() -> Arc<T>,
) -> Arc<T> {
    let mut families = families.lock();
    let family = match families.iter().position(|f| f.name == name) {
        Some(i) => &mut families[i],
        None => {
            families.push(Family { name, help, series: BTreeMap::new() });
            families.last_mut().expect("just pushed")
        }
    };
    family.series.entry(labels).or_insert_with(new).clone()
}

/// The series of `name` with `labels` in `families`, if something registered it.
fn find<T>(families: &Families<T>, name: &str, labels: &Labels) -> Option<Arc<T>> {
    let families = families.lock();
    families.iter().find(|f| f.name == name)?.series.get(labels).cloned()
}

/// The histogram series of `name` with `labels`, if it is registered.
pub(crate) fn existing_histogram(name: &str, labels: &Labels) -> Option<Arc<Buckets>> {
    find(&HISTOGRAMS, name, labels)
}

/// The histogram series of `name` with `labels`.
pub(crate) fn histogram(
    name: &'static str,
    help: &'static str,
    scale: &'static Scale,
    labels: Labels,
) -> Arc<Buckets> {
    find_or_add(&HISTOGRAMS, name, help, labels, || Buckets::detached(scale))
}

/// The gauge series of `name` with `labels`.
pub(crate) fn gauge(name: &'static str, help: &'static str, labels: Labels) -> Arc<Level> {
    find_or_add(&GAUGES, name, help, labels, Arc::default)
}

/// The counter series of `name` with `labels`.
pub(crate) fn counter(name: &'static str, help: &'static str, labels: Labels) -> Arc<Count> {
    find_or_add(&COUNTERS, name, help, labels, Arc::default)
}

/// The counter series of `name` with `labels` that counts nanoseconds and is exported in
/// seconds (`…_seconds_total`).
pub(crate) fn seconds_counter(
    name: &'static str,
    help: &'static str,
    labels: Labels,
) -> Arc<Count> {
    find_or_add(&SECONDS_COUNTERS, name, help, labels, Arc::default)
}

/// Drops the series of `families` nothing else holds any more, then the families left empty.
fn prune<T>(families: &mut Vec<Family<T>>) {
    for family in families.iter_mut() {
        family.series.retain(|_, series| Arc::strong_count(series) > 1);
    }
    families.retain(|family| !family.series.is_empty());
}

/// Every registered family in the Prometheus text format, after dropping the series no
/// longer held.
pub(crate) fn render(out: &mut String) {
    render_families(out, &HISTOGRAMS, "histogram", render_histogram);
    render_families(out, &GAUGES, "gauge", |out, name, labels, level| {
        let _ = writeln!(out, "{name}{} {}", braced(labels, ""), level.0.load(Relaxed));
    });
    render_families(out, &COUNTERS, "counter", |out, name, labels, count| {
        let _ = writeln!(out, "{name}{} {}", braced(labels, ""), count.0.load(Relaxed));
    });
    render_families(out, &SECONDS_COUNTERS, "counter", |out, name, labels, count| {
        let seconds = SECONDS.exported(count.0.load(Relaxed));
        let _ = writeln!(out, "{name}{} {seconds}", braced(labels, ""));
    });
}

/// `families`, pruned, each with its header and then each series by `series`.
fn render_families<T>(
    out: &mut String,
    families: &Families<T>,
    kind: &str,
    series: impl Fn(&mut String, &str, &Labels, &T),
) {
    let mut families = families.lock();
    prune(&mut families);
    for family in families.iter() {
        header(out, family, kind);
        for (labels, value) in &family.series {
            series(out, family.name, labels, value);
        }
    }
}

fn header<T>(out: &mut String, family: &Family<T>, kind: &str) {
    let (name, help) = (family.name, family.help);
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn render_histogram(out: &mut String, name: &str, labels: &Labels, buckets: &Buckets) {
    let scale = buckets.scale;
    let mut total = 0;
    for (i, count) in buckets.counts.iter().take(scale.bounds + 1).enumerate() {
        total += count.load(Relaxed);
        let le = if i == scale.bounds { "+Inf".to_owned() } else { scale.bound(i) };
        let _ = writeln!(out, "{name}_bucket{} {total}", braced(labels, &format!("le=\"{le}\"")));
    }
    let labels = braced(labels, "");
    let sum = scale.exported(buckets.sum.load(Relaxed));
    let _ = writeln!(out, "{name}_sum{labels} {sum}\n{name}_count{labels} {total}");
}

/// `labels` and then `last` (already written out), in braces; nothing when both are empty.
fn braced(labels: &Labels, last: &str) -> String {
    let mut parts: Vec<String> =
        labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    if !last.is_empty() {
        parts.push(last.to_owned());
    }
    if parts.is_empty() { String::new() } else { format!("{{{}}}", parts.join(",")) }
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_lands_in_the_first_bucket_at_or_above_it() {
        let s = &SECONDS;
        for (value, bucket) in [
            (0, 0),
            (10_000, 0),
            (10_001, 1),
            (20_000, 1),
            (20_001, 2),
            (40_000, 2),
            (10_000 << 20, 20),
            ((10_000 << 20) + 1, 21),
            (u64::MAX, 21),
        ] {
            assert_eq!(s.index(value), bucket, "{value} ns");
        }
        assert_eq!((BYTES.index(131_072), BYTES.index(131_073)), (1, 2));
        assert_eq!((BYTES.index(1 << 30), BYTES.index((1 << 30) + 1)), (14, 15));
        assert_eq!((s.bound(0), s.bound(20)), ("0.00001".to_owned(), "10.48576".to_owned()));
        assert_eq!(BYTES.bound(14), "1073741824");
    }

    #[test]
    fn series_render_cumulative_buckets_sum_and_count() {
        let labels = vec![("worker", "w\"1".to_owned())];
        let a = histogram("test_render_seconds", "help text", &SECONDS, labels.clone());
        a.record(15_000);
        a.record(15_000);
        a.record(30_000_000_000);
        // The same labels are the same series.
        histogram("test_render_seconds", "help text", &SECONDS, labels).record(5_000);
        let mut out = String::new();
        render(&mut out);
        let text: Vec<&str> = out.lines().filter(|l| l.contains("test_render")).collect();
        assert_eq!(text[0], "# HELP test_render_seconds help text");
        assert_eq!(text[1], "# TYPE test_render_seconds histogram");
        assert_eq!(text[2], r#"test_render_seconds_bucket{worker="w\"1",le="0.00001"} 1"#);
        assert_eq!(text[3], r#"test_render_seconds_bucket{worker="w\"1",le="0.00002"} 3"#);
        assert_eq!(text[23], r#"test_render_seconds_bucket{worker="w\"1",le="+Inf"} 4"#);
        assert_eq!(text[24], r#"test_render_seconds_sum{worker="w\"1"} 30.000035"#);
        assert_eq!(text[25], r#"test_render_seconds_count{worker="w\"1"} 4"#);
        assert_eq!(text.len(), 26);
    }

    #[test]
    fn gauges_render_their_level_while_raised() {
        let plain = gauge("test_level_plain", "plain help", Vec::new());
        let labeled = gauge("test_level_labeled", "labeled help", vec![("upstream", "a".into())]);
        let rendered = || {
            let mut out = String::new();
            render(&mut out);
            out.lines().filter(|l| l.contains("test_level")).map(str::to_owned).collect::<Vec<_>>()
        };
        let one = Raised::new(&plain);
        let two = Raised::new(&plain);
        let three = Raised::new(&labeled);
        assert_eq!(
            rendered(),
            [
                "# HELP test_level_plain plain help",
                "# TYPE test_level_plain gauge",
                "test_level_plain 2",
                "# HELP test_level_labeled labeled help",
                "# TYPE test_level_labeled gauge",
                r#"test_level_labeled{upstream="a"} 1"#,
            ]
        );
        drop((one, three));
        assert_eq!(rendered()[2], "test_level_plain 1");
        assert_eq!(rendered()[5], r#"test_level_labeled{upstream="a"} 0"#);
        drop(two);
        assert_eq!(rendered()[2], "test_level_plain 0");
    }

    #[test]
    fn counters_render_and_a_series_no_longer_held_goes() {
        let rendered = || {
            let mut out = String::new();
            render(&mut out);
            out.lines().filter(|l| l.contains("test_count")).map(str::to_owned).collect::<Vec<_>>()
        };
        let kept = counter("test_count_total", "count help", vec![("route", "kept".into())]);
        let gone = counter("test_count_total", "count help", vec![("route", "gone".into())]);
        kept.increment(2);
        gone.increment(1);
        assert_eq!(
            rendered(),
            [
                "# HELP test_count_total count help",
                "# TYPE test_count_total counter",
                // In label order.
                r#"test_count_total{route="gone"} 1"#,
                r#"test_count_total{route="kept"} 2"#,
            ]
        );
        // A reload that keeps the route gets the same series back; one that removes it drops
        // its holder, and the series goes.
        let again = counter("test_count_total", "count help", vec![("route", "kept".into())]);
        assert!(Arc::ptr_eq(&kept, &again));
        drop(gone);
        assert_eq!(rendered()[2..], [r#"test_count_total{route="kept"} 2"#]);
        drop((kept, again));
        assert!(rendered().is_empty(), "{:?}", rendered());
    }

    #[test]
    fn a_seconds_counter_counts_nanoseconds_and_renders_seconds() {
        let cpu =
            seconds_counter("test_cpu_seconds_total", "cpu help", vec![("tenant", "a".into())]);
        cpu.increment(1_500_000_000);
        cpu.increment(250_000);
        let mut out = String::new();
        render(&mut out);
        let line = out.lines().find(|l| l.starts_with("test_cpu_seconds_total{")).unwrap();
        assert_eq!(line, r#"test_cpu_seconds_total{tenant="a"} 1.50025"#);
        assert_eq!(cpu.get(), 1_500_250_000);
    }

    #[test]
    fn keyed_series_are_made_once_each() {
        let keyed: Keyed<u16, Arc<Count>> = Keyed::default();
        let made = AtomicU64::new(0);
        for status in [200, 200, 404, 200] {
            let make = || {
                made.fetch_add(1, Relaxed);
                Arc::new(Count::default())
            };
            keyed.with(status, make, |count| count.increment(1));
        }
        assert_eq!(made.load(Relaxed), 2);
        keyed.with(200, Arc::default, |count| assert_eq!(count.0.load(Relaxed), 3));
    }
}
