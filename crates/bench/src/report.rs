//! The report made of a lab run's [`Results`]: `results.json`, `report.md` with its tables
//! and decision matrix, and the SVG charts (see [`crate::charts`]).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use crate::results::{CrossCheck, Percentiles, Results, Steal};
use crate::workload::Workload;

mod capacity;
mod matrix;
mod shipped;

impl Results {
    /// Writes `results.json`, `report.md` and the charts into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        fs::create_dir_all(dir)?;
        fs::write(dir.join("results.json"), serde_json::to_string_pretty(self)?)?;
        let charts = crate::charts::write_all(self, dir)?;
        fs::write(dir.join("report.md"), self.markdown(&charts))?;
        Ok(())
    }

    /// `report.md`.
    pub fn markdown(&self, charts: &[String]) -> String {
        let m = &self.meta;
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(w, "# edgegate benchmark lab: {} mode\n", m.mode);
        let _ = writeln!(w, "- command: `{}`", m.command);
        let _ = writeln!(w, "- date: {}", m.date);
        let _ =
            writeln!(w, "- CPU: {} ({} CPUs available), kernel {}", m.cpu_model, m.cpus, m.kernel);
        if !m.idle.is_empty() {
            let _ = writeln!(w, "- idle CPUs: {}", m.idle);
        }
        let _ = writeln!(w, "- pinning: {}", m.pinning);
        let steals: Vec<Steal> =
            self.measured().flat_map(|r| r.runs.iter().filter_map(|run| run.steal)).collect();
        if let Some(server) = span(steals.iter().map(|s| s.server_pct)) {
            let _ = match span(steals.iter().filter_map(|s| s.load_pct)) {
                Some(load) => writeln!(
                    w,
                    "- the VM's steal (time the hypervisor took, /proc/stat) per run: server's CPUs {server}, load generator's {load}"
                ),
                None => writeln!(
                    w,
                    "- the VM's steal (time the hypervisor took, /proc/stat) per run: {server}"
                ),
            };
        }
        if !self.capacity_workloads().is_empty() {
            let _ = writeln!(
                w,
                "- capacity: a closed loop with the server's CPU kept busy, in rounds, the runtimes taking turns ([below](#capacity))"
            );
        }
        if self.workloads().is_empty() {
            let _ = writeln!(w);
            return self.sections(charts, out);
        }
        let _ = writeln!(
            w,
            "- load: open loop at a constant rate, {} keep-alive connections, {:.1} s warm-up then {:.1} s recorded per run; latency from each request's due time (coordinated omission corrected)",
            m.connections, m.warmup_s, m.duration_s
        );
        if m.rounds > 1 {
            let _ = writeln!(
                w,
                "- interleaved: each run is {} slices per runtime (fewer when a slice would have under 10 requests), the runtimes taking turns (the others stopped meanwhile), merged; the first slice has the whole warm-up, the others {:.2} s",
                m.rounds,
                m.warmup_s / m.rounds as f64
            );
        }
        if self.measured().any(|r| !r.saturation.is_empty()) {
            let _ = writeln!(
                w,
                "- saturation (latency-bounded, not a capacity): the highest rate whose p99 stays under {:.0} µs ({:.0} ms for image-resize and mixed) with no errors; a rate fails when two probes at it fail",
                m.bounds_us.0,
                m.bounds_us.1 / 1000.0
            );
        }
        let _ = writeln!(w);
        self.sections(charts, out)
    }

    /// Everything after the header.
    fn sections(&self, charts: &[String], mut out: String) -> String {
        let w = &mut out;
        let _ = writeln!(w, "## Runtimes\n");
        let _ = writeln!(w, "| runtime | version | status |\n|---|---|---|");
        for r in &self.runtimes {
            let status = match (&r.missing, &r.failed) {
                (Some(why), _) => format!("**missing**: {why}"),
                (_, Some(why)) => format!("**failed**: {why}"),
                _ => {
                    let wrong: Vec<_> = r
                        .checks
                        .iter()
                        .filter(|c| !c.ok)
                        .map(|c| format!("{} wrong ({})", c.workload.name(), c.detail))
                        .collect();
                    if wrong.is_empty() {
                        "ran; every answer checked correct".into()
                    } else {
                        format!("ran; {}", wrong.join("; "))
                    }
                }
            };
            let _ = writeln!(
                w,
                "| {} | {} | {} |",
                r.runtime.name(),
                r.version.as_deref().unwrap_or("–"),
                status.replace('|', "\\|")
            );
        }
        capacity::section(self, w);
        shipped::section(self, w);
        if !self.workloads().is_empty() {
            let _ = writeln!(
                w,
                "## Latency at comparable load\n\nAn open loop at constant rates; for the light workloads, shares of the slowest runtime's capacity on each, so that every runtime is compared where it works, not where all of them idle. Latency is from each request's due time."
            );
        }
        for workload in self.workloads() {
            let _ = writeln!(w, "\n### {}\n", workload.name());
            let _ = writeln!(
                w,
                "| runtime | rate | achieved | p50 µs | p95 µs | p99 µs | p99.9 µs | max µs | stddev µs | errors | CPU µs/req | peak RSS MiB | steal % server / load | calm p99 µs (slices) |"
            );
            let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
            for rate in self.rates(workload) {
                for r in self.measured() {
                    let Some(run) = r.run(workload, rate) else { continue };
                    let l = &run.latency;
                    let flag = if run.kept_schedule { "" } else { " ⚠" };
                    let paused =
                        if run.steal.is_some_and(|s| s.bounds_p99()) { " †" } else { "" };
                    let share = run.of_capacity.map_or(String::new(), |(f, of)| {
                        format!(" ({:.0} % of {})", f * 100.0, of.name())
                    });
                    let _ = writeln!(
                        w,
                        "| {} | {rate:.0}{share} | {:.0}{flag} | {:.0} | {:.0} | {:.0}{paused} | {:.0} | {:.0} | {:.0} | {} | {} | {:.1} | {} | {} |",
                        r.runtime.name(),
                        run.achieved_rate,
                        l.p50,
                        l.p95,
                        l.p99,
                        l.p999,
                        l.max,
                        l.stddev,
                        run.errors.total(),
                        run.cpu_us_per_request.map_or("–".into(), |c| format!("{c:.1}")),
                        run.peak_rss_mb,
                        run.steal.map_or("–".into(), |s| s.describe()),
                        run.calm.as_ref().map_or("–".into(), |c| format!(
                            "{:.0} ({} of {})",
                            c.latency.p99,
                            c.slices,
                            run.round_p99_us.len()
                        )),
                    );
                }
            }
            self.gc_pauses(workload, w);
            let sats: Vec<_> = self
                .measured()
                .filter_map(|r| Some((r.runtime, r.saturation_of(workload)?)))
                .collect();
            if !sats.is_empty() {
                let _ = writeln!(
                    w,
                    "\nSaturation (p99 < {:.0} µs): {}",
                    sats[0].1.bound_us,
                    sats.iter()
                        .map(|(rt, s)| format!("{} {}", rt.name(), s.describe()))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        if self.measured().any(|r| r.runs.iter().any(|run| !run.kept_schedule)) {
            let _ = writeln!(
                w,
                "\n⚠: the load generator fell behind its schedule (p99 lateness over a fifth of the workload's bound: 200 µs, or 20 ms for image-resize and mixed): at that rate the generator, not only the server, was the limit."
            );
        }
        if self
            .measured()
            .any(|r| r.runs.iter().any(|run| run.steal.is_some_and(|s| s.bounds_p99())))
        {
            let _ = writeln!(
                w,
                "\n†: the hypervisor took {:.0} % or more of the CPUs' time during the run (steal on the server's CPUs plus the generator's, from /proc/stat): about that share of requests met a pause of the VM, milliseconds long, that no runtime can avoid, so this p99 and those above it measure the VM as much as the runtime.",
                Steal::P99_BOUND_PCT
            );
        }
        if self.measured().any(|r| r.runs.iter().any(|run| run.steal.is_some())) {
            let _ = writeln!(
                w,
                "\nCalm p99: the p99 of the run's slices whose steal and other processes' CPU stayed under {:.0} % and whose every request was answered, merged, and how many of its slices those were; – when none did. A runtime's own tail, as far as the VM let it be seen. Steal falls only on time a CPU wants to run, so a runtime that needs more CPU, or wakes its CPU more often, meets more of it and may have fewer calm slices.",
                Steal::P99_BOUND_PCT
            );
        }
        let _ = writeln!(
            w,
            "\n## Cold start\n\nFrom spawning the process to its first correct answer, after one start to bring its files into the page cache; the median of the starts [min–max] when repeated. edgegate's hot-swap rows are the twin of its start after a new version: from `POST /reload` (which compiles the new version) to the first answer, and that first answer's time less the steady p50 of the same request just before the swap.\n"
        );
        let _ = writeln!(w, "| runtime | start | ms | starts |\n|---|---|---|---|");
        for r in self.measured() {
            for c in &r.cold_start {
                let range = crate::results::Spread::of(c.rounds.iter().copied())
                    .filter(|_| c.rounds.len() > 1)
                    .map_or(String::new(), |s| format!(" [{:.1}–{:.1}]", s.min, s.max));
                let _ = writeln!(
                    w,
                    "| {} | {} | {:.1}{range} | {} |",
                    r.runtime.name(),
                    c.what,
                    c.ms,
                    c.rounds.len().max(1)
                );
            }
        }
        self.memory(w);
        self.cross_checks(w);
        matrix::write(self, w);
        if !charts.is_empty() {
            let _ = writeln!(w, "\n## Charts\n");
            for chart in charts {
                let _ = writeln!(w, "![{chart}]({chart})");
            }
        }
        out
    }

    /// The garbage-collection pauses a runtime reported during `workload`'s runs, beside the
    /// tail of every runtime at the same rate.
    fn gc_pauses(&self, workload: Workload, w: &mut String) {
        let collected: Vec<_> = self
            .measured()
            .flat_map(|r| {
                r.runs.iter().filter(|run| run.workload == workload).map(move |run| (r, run))
            })
            .filter_map(|(r, run)| Some((r.runtime, run, run.gc?)))
            .collect();
        if collected.is_empty() {
            return;
        }
        let _ = writeln!(
            w,
            "\nGarbage collection: the pauses V8 reported to Node.js's `perf_hooks` during each run's slices (warm-ups included), beside every runtime's tail at that rate. edgegate has no collector: a request's memory goes with its instance.\n"
        );
        let _ = writeln!(
            w,
            "| runtime | rate | pauses | major | longest ms | total ms | share of run time | p99.9 / max µs, each runtime |\n|---|---|---|---|---|---|---|---|"
        );
        for (runtime, run, gc) in collected {
            let tails: Vec<String> = self
                .measured()
                .filter_map(|r| {
                    let l = &r.run(workload, run.rate)?.latency;
                    Some(format!("{} {:.0} / {:.0}", r.runtime.name(), l.p999, l.max))
                })
                .collect();
            let _ = writeln!(
                w,
                "| {} | {:.0} | {} | {} | {:.1} | {:.0} | {:.1} % | {} |",
                runtime.name(),
                run.rate,
                gc.count,
                gc.major,
                gc.max_ms,
                gc.total_ms,
                gc.total_ms / (run.wall_s * 10.0).max(1e-9),
                tails.join(", ")
            );
        }
    }

    /// Memory under load, when there were fixed-rate runs.
    fn memory(&self, w: &mut String) {
        if self.workloads().is_empty() {
            return;
        }
        let _ = writeln!(
            w,
            "\n## Memory\n\n| runtime | idle RSS MiB | workload | rate | peak RSS MiB | max in flight | KiB per request in flight |\n|---|---|---|---|---|---|---|"
        );
        for r in self.measured() {
            for run in &r.runs {
                if Some(run.rate) != self.rates(run.workload).last().copied() {
                    continue;
                }
                let _ = writeln!(
                    w,
                    "| {} | {} | {} | {:.0} | {:.1} | {} | {} |",
                    r.runtime.name(),
                    r.idle_rss_mb.map_or("–".into(), |m| format!("{m:.1}")),
                    run.workload.name(),
                    run.rate,
                    run.peak_rss_mb,
                    run.max_in_flight,
                    run.memory_per_in_flight_kb.map_or("–".into(), |k| format!("{k:.0}"))
                );
            }
        }
        let _ = writeln!(
            w,
            "\nFor edgegate, a request in flight is a live Wasm instance: the last column is memory per concurrent instance (peak RSS growth over the most instances alive at once)."
        );
    }

    /// The cross-checks with wrk, round by round, and whether the medians agree.
    fn cross_checks(&self, w: &mut String) {
        let checks: Vec<_> =
            self.ran().filter_map(|r| Some((r.runtime, r.cross_check.as_ref()?))).collect();
        if checks.is_empty() {
            return;
        }
        let _ = writeln!(
            w,
            "\n## Cross-check with wrk\n\nOne endpoint loaded by wrk and by the lab at the same time, each at about the same rate on connections of its own (wrk {}, the lab {} as in its runs), in rounds. wrk measures from each request's send; the lab reports from its due time, and from the send as wrk does. Agreement: the medians of the rounds within {:.0} % of wrk's at p50 and p99.\n",
            checks[0].1.connections,
            checks[0].1.lab_connections,
            CrossCheck::TOLERANCE * 100.0
        );
        let _ = writeln!(
            w,
            "| runtime | round | wrk rps | lab rps | wrk p50 / p99 µs | lab p50 / p99 µs | lab from the send µs | steal % server / load |\n|---|---|---|---|---|---|---|---|"
        );
        let pair = |p: Percentiles| format!("{:.0} / {:.0}", p.p50, p.p99);
        let percent = |(a, b): (f64, f64)| format!("{:+.0} % / {:+.0} %", a * 100.0, b * 100.0);
        let verdict = |agrees: bool| if agrees { "agrees" } else { "**does not agree**" };
        for &(runtime, check) in &checks {
            for (i, r) in check.rounds.iter().enumerate() {
                let _ = writeln!(
                    w,
                    "| {} | {} | {:.0} | {:.0} | {} | {} | {} | {} |",
                    runtime.name(),
                    i + 1,
                    r.wrk_rate,
                    r.lab_rate,
                    pair(r.wrk),
                    pair(r.lab),
                    pair(r.lab_sent),
                    r.steal.map_or("–".into(), |s| s.describe()),
                );
            }
            let (wrk, lab, sent) = check.medians();
            let _ = writeln!(
                w,
                "| {} | **median** | | | {} | {} ({}, {}) | {} ({}, {}) | |",
                runtime.name(),
                pair(wrk),
                pair(lab),
                percent(lab.differences(&wrk)),
                verdict(lab.agrees_with(&wrk)),
                pair(sent),
                percent(sent.differences(&wrk)),
                verdict(sent.agrees_with(&wrk)),
            );
        }
    }
}

/// The smallest to the largest of some percentages, as "lo–hi %"; `None` when there are none.
fn span(values: impl Iterator<Item = f64>) -> Option<String> {
    let (lo, hi) = values.fold(None, |span: Option<(f64, f64)>, v| {
        Some(span.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
    })?;
    Some(format!("{lo:.1}–{hi:.1} %"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Runtime;
    use crate::latency::Summary;
    use crate::results::tests::{check, round};
    use crate::results::{Calm, Meta, Run, RuntimeResult, Steal};
    use crate::workload::Workload;

    #[test]
    fn the_report_shows_each_round_and_the_verdict() {
        let mut node = RuntimeResult::new(Runtime::Node, Some("v20".into()));
        node.cross_check = Some(check(vec![round((100.0, 400.0), (150.0, 400.0))]));
        let results = Results { meta: Meta::default(), runtimes: vec![node] };
        let md = results.markdown(&[]);
        let section = &md[md.find("## Cross-check with wrk").expect("a cross-check section")..];
        assert!(
            section.contains("| node | 1 | 1000 | 1000 | 100 / 400 | 150 / 400 |"),
            "{section}"
        );
        assert!(section.contains("+50 % / +0 %, **does not agree**"), "{section}");
        let mut quiet = results.clone();
        quiet.runtimes[0].cross_check = None;
        assert!(!quiet.markdown(&[]).contains("Cross-check"));
    }

    #[test]
    fn each_cross_check_round_shows_the_vms_steal() {
        let mut stolen = round((100.0, 400.0), (110.0, 900.0));
        stolen.steal = Some(Steal { server_pct: 2.5, load_pct: Some(0.2) });
        let mut node = RuntimeResult::new(Runtime::Node, Some("v20".into()));
        node.cross_check = Some(check(vec![stolen, round((100.0, 400.0), (100.0, 400.0))]));
        let md = Results { meta: Meta::default(), runtimes: vec![node] }.markdown(&[]);
        let row = "| node | 1 | 1000 | 1000 | 100 / 400 | 110 / 900 | 110 / 900 | 2.5 / 0.2 |";
        assert!(md.contains(row), "{md}");
        assert!(md.contains("| node | 2 | 1000 | 1000 | 100 / 400 | 100 / 400 | 100 / 400 | – |"));
    }

    fn run(p99: f64, steal: Option<Steal>, calm: Option<Calm>) -> Run {
        Run {
            workload: Workload::DbLookup,
            rate: 2000.0,
            latency: Summary { p99, ..Summary::default() },
            kept_schedule: true,
            round_p99_us: vec![p99; 5],
            steal,
            calm,
            ..Run::default()
        }
    }

    #[test]
    fn the_report_marks_the_p99s_the_vm_bounded_and_gives_the_calm_ones() {
        let mut edgegate = RuntimeResult::new(Runtime::Edgegate, Some("0.1".into()));
        let calm = Calm { slices: 3, latency: Summary { p99: 412.0, ..Summary::default() } };
        edgegate.runs.push(run(
            3308.0,
            Some(Steal { server_pct: 5.3, load_pct: Some(4.6) }),
            Some(calm),
        ));
        let mut node = RuntimeResult::new(Runtime::Node, Some("v20".into()));
        node.runs.push(run(520.0, Some(Steal { server_pct: 0.2, load_pct: Some(0.1) }), None));
        let results = Results { meta: Meta::default(), runtimes: vec![edgegate, node] };
        let md = results.markdown(&[]);
        assert!(md.contains("| 3308 † |"), "{md}");
        assert!(md.contains("| 5.3 / 4.6 | 412 (3 of 5) |"), "{md}");
        assert!(md.contains("| 520 |") && md.contains("| 0.2 / 0.1 | – |"), "{md}");
        assert!(md.contains("\n†: the hypervisor took 1 % or more"), "{md}");
        assert!(md.contains("\nCalm p99:"), "{md}");
        assert!(
            md.contains("per run: server's CPUs 0.2–5.3 %, load generator's 0.1–4.6 %"),
            "{md}"
        );
        // No run the VM bounded: no mark and no note of it; no steal read: no calm note.
        let mut quiet = results.clone();
        quiet.runtimes.remove(0);
        let md = quiet.markdown(&[]);
        assert!(!md.contains('†'), "{md}");
        quiet.runtimes[0].runs[0].steal = None;
        let md = quiet.markdown(&[]);
        assert!(!md.contains("Calm p99") && !md.contains("steal (time"), "{md}");
    }
}
