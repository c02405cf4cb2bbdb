//! The decision matrix: Wasm (edgegate) against V8 (Node.js, workerd), one row per question.
//!
//! A measured row compares round figures (capacity rounds, fixed-rate slices, starts) with
//! [`crate::verdict::compare`]: a winner only outside the noise, never from a round the VM's
//! steal or other processes disturbed. Rows that were not measured say so.

use std::fmt::Write as _;

use crate::catalogue::Runtime;
use crate::results::{Results, RuntimeResult, Spread};
use crate::verdict::{self, Verdict};
use crate::workload::Workload;

/// One measurable question: its figures per runtime, and which way is better.
struct Question<'a> {
    text: String,
    unit: &'a str,
    higher_wins: bool,
    /// What the rounds are, for the source column.
    source: &'a str,
    rounds: &'a dyn Fn(&RuntimeResult) -> Vec<f64>,
}

/// Writes the matrix.
pub(super) fn write(results: &Results, w: &mut String) {
    let _ = writeln!(w, "\n## Decision matrix: Wasm (edgegate) against V8 (Node.js, workerd)\n");
    let _ = writeln!(
        w,
        "A winner is named only when the two runtimes' rounds do not overlap, or a 99 % bootstrap interval of the ratio of their medians leaves out 1; otherwise: no measurable difference. At least {} calm rounds each are needed.\n",
        verdict::MIN_ROUNDS
    );
    let _ =
        writeln!(w, "| question | edgegate | best V8 | verdict | source |\n|---|---|---|---|---|");
    let Some(edgegate) = results.result(Runtime::Edgegate) else {
        let _ = writeln!(w, "| (edgegate did not run: nothing to compare) | | | | |");
        return;
    };
    let v8: Vec<&RuntimeResult> =
        [Runtime::Node, Runtime::Workerd].into_iter().filter_map(|r| results.result(r)).collect();
    for workload in results.capacity_workloads() {
        let name = workload.name();
        let rps = move |r: &RuntimeResult| capacity_rounds(r, workload, |c| c.rps);
        row(
            w,
            edgegate,
            &v8,
            &Question {
                text: format!("capacity, {name}"),
                unit: "req/s",
                higher_wins: true,
                source: "calm capacity rounds",
                rounds: &rps,
            },
        );
        let cpu = move |r: &RuntimeResult| capacity_rounds(r, workload, |c| c.cpu_us_per_request);
        row(
            w,
            edgegate,
            &v8,
            &Question {
                text: format!("server CPU per request, {name}"),
                unit: "µs",
                higher_wins: false,
                source: "calm capacity rounds",
                rounds: &cpu,
            },
        );
    }
    for workload in results.workloads() {
        for rate in results.rates(workload) {
            let p99 = move |r: &RuntimeResult| calm_p99s(r, workload, rate);
            let share = edgegate
                .run(workload, rate)
                .and_then(|run| run.of_capacity)
                .map_or(String::new(), |(f, of)| {
                    format!(" ({:.0} % of {}'s capacity)", f * 100.0, of.name())
                });
            row(
                w,
                edgegate,
                &v8,
                &Question {
                    text: format!("p99 latency, {} at {rate:.0} rps{share}", workload.name()),
                    unit: "µs",
                    higher_wins: false,
                    source: "calm fixed-rate slices",
                    rounds: &p99,
                },
            );
        }
        // Node reports its collector on every workload; json-transform is the one built to
        // ask what it costs, so it alone gets matrix rows (the tables have the rest).
        let node_runs = results.result(Runtime::Node).map_or(&[][..], |r| &r.runs[..]);
        let gc_question = workload == Workload::JsonTransform;
        for run in node_runs.iter().filter(|run| gc_question && run.workload == workload) {
            let Some(gc) = run.gc else { continue };
            let _ = writeln!(
                w,
                "| garbage-collection pauses, {} at {:.0} rps | none: no collector | {} ({} major), longest {:.1} ms, {:.1} % of the time (node) | Wasm: a cost V8 pays and Wasm does not; what it does to the tail is the p99 row above | perf_hooks in Node.js |",
                workload.name(),
                run.rate,
                gc.count,
                gc.major,
                gc.max_ms,
                gc.total_ms / (run.wall_s * 10.0).max(1e-9),
            );
        }
        if edgegate.saturation_of(workload).is_some() {
            let sat = |r: &RuntimeResult| {
                r.saturation_of(workload).and_then(|s| s.rate).into_iter().collect::<Vec<_>>()
            };
            let ours = sat(edgegate).first().copied();
            let theirs =
                v8.iter().filter_map(|r| Some((sat(r).first().copied()?, r.runtime))).next();
            let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0} rps"));
            let _ = writeln!(
                w,
                "| p99-bounded saturation rate, {} | {} | {} | no verdict: one search each, and it follows the VM's steal | latency-bounded search |",
                workload.name(),
                cell(ours),
                theirs.map_or("–".into(), |(v, rt)| format!("{v:.0} rps ({})", rt.name())),
            );
        }
    }
    let starts = |r: &RuntimeResult| {
        r.cold_start
            .iter()
            .find(|c| c.what == "start" || c.what == "start, modules cached")
            .map_or_else(
                Vec::new,
                |c| if c.rounds.is_empty() { vec![c.ms] } else { c.rounds.clone() },
            )
    };
    row(
        w,
        edgegate,
        &v8,
        &Question {
            text: "cold start, process to first answer".into(),
            unit: "ms",
            higher_wins: false,
            source: "repeated starts",
            rounds: &starts,
        },
    );
    let rss = |r: &RuntimeResult| {
        if r.idle_rss_rounds.is_empty() {
            r.idle_rss_mb.into_iter().collect()
        } else {
            r.idle_rss_rounds.clone()
        }
    };
    row(
        w,
        edgegate,
        &v8,
        &Question {
            text: "resident memory after start".into(),
            unit: "MiB",
            higher_wins: false,
            source: "repeated starts",
            rounds: &rss,
        },
    );
    let _ = writeln!(
        w,
        "| isolation between requests | a fresh instance per request | an isolate reused across requests | Wasm | design (docs/architecture.md), not measured |"
    );
    let _ = writeln!(
        w,
        "| worker languages and libraries | Rust (no_std guest) | JavaScript and npm | V8 | opinion, not measured |"
    );
}

/// One measured row: edgegate against the V8 runtime with the better median.
fn row(w: &mut String, edgegate: &RuntimeResult, v8: &[&RuntimeResult], q: &Question<'_>) {
    let ours = (q.rounds)(edgegate);
    let better = |a: f64, b: f64| if q.higher_wins { a > b } else { a < b };
    let theirs = v8
        .iter()
        .filter_map(|r| {
            let rounds = (q.rounds)(r);
            Some((Spread::of(rounds.iter().copied())?.median, rounds, r.runtime))
        })
        .reduce(|best, next| if better(next.0, best.0) { next } else { best });
    let Some((_, theirs, runtime)) = theirs.filter(|_| !ours.is_empty()) else {
        let _ = writeln!(w, "| {} | {} | – | not measured | |", q.text, cell(&ours, q.unit));
        return;
    };
    let verdict = match verdict::compare(&ours, &theirs, q.higher_wins) {
        Verdict::First(r) => format!("Wasm ({:.2}×, {:.2}–{:.2})", r.ratio, r.lo, r.hi),
        Verdict::Second(r) => format!("V8 ({:.2}×, {:.2}–{:.2})", r.ratio, r.lo, r.hi),
        Verdict::NoDifference(r) => {
            format!("no measurable difference (ratio {:.2}, {:.2}–{:.2})", r.ratio, r.lo, r.hi)
        }
        Verdict::TooFew(n) => {
            format!("no verdict: {n} rounds, {} needed", verdict::MIN_ROUNDS)
        }
    };
    let _ = writeln!(
        w,
        "| {} | {} | {} ({}) | {verdict} | {}, {} and {} |",
        q.text,
        cell(&ours, q.unit),
        cell(&theirs, q.unit),
        runtime.name(),
        q.source,
        ours.len(),
        theirs.len(),
    );
}

/// A median and range as a cell: `40044 req/s [31259–41700]`; whole numbers of requests,
/// tenths of the rest.
fn cell(rounds: &[f64], unit: &str) -> String {
    let d = if unit == "req/s" { 0 } else { 1 };
    match Spread::of(rounds.iter().copied()) {
        Some(s) if rounds.len() > 1 => {
            format!("{:.d$} {unit} [{:.d$}–{:.d$}]", s.median, s.min, s.max)
        }
        Some(s) => format!("{:.d$} {unit}", s.median),
        None => "–".into(),
    }
}

/// A capacity figure of the calm rounds.
fn capacity_rounds(
    r: &RuntimeResult,
    workload: Workload,
    figure: impl Fn(&crate::results::CapacityRound) -> f64,
) -> Vec<f64> {
    r.capacity_of(workload).map_or_else(Vec::new, |c| c.calm().map(figure).collect())
}

/// The p99 of each calm slice of a fixed-rate run.
fn calm_p99s(r: &RuntimeResult, workload: Workload, rate: f64) -> Vec<f64> {
    let Some(run) = r.run(workload, rate) else { return Vec::new() };
    run.round_p99_us
        .iter()
        .zip(&run.round_calm)
        .filter(|(_, calm)| **calm)
        .map(|(p99, _)| *p99)
        .collect()
}
