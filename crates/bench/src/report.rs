//! The results of a lab run, and the report made of them: `results.json`, `report.md` with
//! its tables and decision matrix, and the SVG charts (see [`crate::charts`]).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::affinity::CpuPlan;
use crate::lab::Plan;
use crate::latency::Summary;
use crate::load::Errors;
use crate::runtimes::Runtime;
use crate::workload::Workload;

/// Everything one lab run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// How and where it ran.
    pub meta: Meta,
    /// One entry per runtime, in plan order.
    pub runtimes: Vec<RuntimeResult>,
}

/// The report header's facts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Meta {
    /// `quick` or `full`.
    pub mode: String,
    /// The command that produced it.
    pub command: String,
    /// When it started (an HTTP date, UTC).
    pub date: String,
    /// `/proc/cpuinfo`'s model name.
    pub cpu_model: String,
    /// CPUs the lab could use.
    pub cpus: usize,
    /// The kernel (`uname -sr`).
    pub kernel: String,
    /// How idle CPUs wait for work ([`crate::procfs::idle_state`]).
    #[serde(default)]
    pub idle: String,
    /// Which CPUs the load and the server ran on.
    pub pinning: String,
    /// Keep-alive connections.
    pub connections: usize,
    /// Warm-up and recorded seconds of each fixed-rate run.
    pub warmup_s: f64,
    /// Recorded seconds of each fixed-rate run.
    pub duration_s: f64,
    /// Slices of each fixed-rate run, the runtimes taking turns.
    #[serde(default)]
    pub rounds: usize,
    /// The p99 bounds of the saturation search, light and heavy workloads, in µs.
    pub bounds_us: (f64, f64),
}

impl Meta {
    /// The facts of this machine and `plan`.
    pub fn collect(plan: &Plan, cpus: &CpuPlan) -> Self {
        let cpu_model = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let uname = rustix::system::uname();
        Self {
            mode: plan.mode.clone(),
            command: plan.command.clone(),
            date: httpdate::fmt_http_date(std::time::SystemTime::now()),
            cpu_model,
            cpus: crate::affinity::available_cpus().map_or(0, |c| c.len()),
            kernel: format!(
                "{} {}",
                uname.sysname().to_string_lossy(),
                uname.release().to_string_lossy()
            ),
            idle: crate::procfs::idle_state(),
            pinning: cpus.describe(),
            connections: plan.connections,
            warmup_s: plan.warmup.as_secs_f64(),
            duration_s: plan.duration.as_secs_f64(),
            rounds: plan.rounds,
            bounds_us: (plan.bound.as_secs_f64() * 1e6, plan.heavy_bound.as_secs_f64() * 1e6),
        }
    }
}

/// One runtime's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimeResult {
    /// Which runtime.
    pub runtime: Runtime,
    /// Its version, when it could be started.
    pub version: Option<String>,
    /// Why it did not run at all (not installed).
    pub missing: Option<String>,
    /// Why it stopped part way (it did not start, or crashed).
    pub failed: Option<String>,
    /// Start-up times.
    pub cold_start: Vec<ColdStart>,
    /// Resident memory after start, MiB.
    pub idle_rss_mb: Option<f64>,
    /// Whether each workload was answered correctly (a wrong answer is not measured).
    pub checks: Vec<Check>,
    /// Fixed-rate runs.
    pub runs: Vec<Run>,
    /// Saturation searches.
    pub saturation: Vec<Saturation>,
    /// The same endpoint measured by the lab and by wrk, when asked for.
    pub cross_check: Option<CrossCheck>,
}

/// The lab and an outside tool (wrk) on one endpoint, both at once at about the same rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CrossCheck {
    /// The endpoint.
    pub url: String,
    /// wrk's connections (as many as its pause after each answer needs to reach the rate).
    pub connections: usize,
    /// The lab's connections: as many as in its fixed-rate runs.
    #[serde(default)]
    pub lab_connections: usize,
    /// Rounds, each with both tools loading the endpoint at once.
    pub rounds: Vec<CrossRound>,
}

/// One round of a cross-check.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CrossRound {
    /// The lab's rate (what wrk reached in the round before).
    pub lab_rate: f64,
    /// The rate wrk reached.
    pub wrk_rate: f64,
    /// wrk's latency, from each request's send.
    pub wrk: Percentiles,
    /// The lab's latency from each request's due time (what its reports show).
    pub lab: Percentiles,
    /// The lab's latency from each request's send, as wrk measures.
    pub lab_sent: Percentiles,
    /// The VM's steal during the lab's recording (`None`: not read).
    #[serde(default)]
    pub steal: Option<Steal>,
}

/// A p50 and a p99, µs.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Percentiles {
    /// The median, µs.
    pub p50: f64,
    /// The 99th percentile, µs.
    pub p99: f64,
}

impl Percentiles {
    /// How far `self` is from `reference` at p50 and p99, as fractions of the reference.
    pub fn differences(&self, reference: &Self) -> (f64, f64) {
        ((self.p50 - reference.p50) / reference.p50, (self.p99 - reference.p99) / reference.p99)
    }

    /// Whether `self` is within [`CrossCheck::TOLERANCE`] of `reference` at p50 and p99.
    pub fn agrees_with(&self, reference: &Self) -> bool {
        let (p50, p99) = self.differences(reference);
        p50.abs() <= CrossCheck::TOLERANCE && p99.abs() <= CrossCheck::TOLERANCE
    }
}

impl From<Summary> for Percentiles {
    fn from(s: Summary) -> Self {
        Self { p50: s.p50, p99: s.p99 }
    }
}

impl CrossCheck {
    /// The tolerance between the lab and wrk.
    pub const TOLERANCE: f64 = 0.15;

    /// The median over the rounds of one tool's figures.
    pub fn median(&self, of: impl Fn(&CrossRound) -> Percentiles) -> Percentiles {
        let middle = |f: &dyn Fn(&Percentiles) -> f64| {
            let mut v: Vec<f64> = self.rounds.iter().map(|r| f(&of(r))).collect();
            v.sort_by(f64::total_cmp);
            match v.len() {
                0 => f64::NAN,
                n if n % 2 == 1 => v[n / 2],
                n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
            }
        };
        Percentiles { p50: middle(&|p| p.p50), p99: middle(&|p| p.p99) }
    }

    /// The medians of wrk, of the lab from the due time, and of the lab from the send.
    pub fn medians(&self) -> (Percentiles, Percentiles, Percentiles) {
        (self.median(|r| r.wrk), self.median(|r| r.lab), self.median(|r| r.lab_sent))
    }
}

impl RuntimeResult {
    /// A runtime that ran, `version`, before anything is measured.
    pub fn new(runtime: Runtime, version: Option<String>) -> Self {
        Self {
            runtime,
            version,
            missing: None,
            failed: None,
            cold_start: Vec::new(),
            idle_rss_mb: None,
            checks: Vec::new(),
            runs: Vec::new(),
            saturation: Vec::new(),
            cross_check: None,
        }
    }

    /// A runtime that is not installed.
    pub fn missing(runtime: Runtime, why: String) -> Self {
        Self { missing: Some(why), ..Self::new(runtime, None) }
    }

    /// A runtime that failed part way.
    pub fn failed(runtime: Runtime, version: String, why: String) -> Self {
        Self { failed: Some(why), ..Self::new(runtime, Some(version)) }
    }

    fn run(&self, workload: Workload, rate: f64) -> Option<&Run> {
        self.runs.iter().find(|r| r.workload == workload && r.rate == rate)
    }

    fn saturation_of(&self, workload: Workload) -> Option<&Saturation> {
        self.saturation.iter().find(|s| s.workload == workload)
    }
}

/// One start-up time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ColdStart {
    /// Which start.
    pub what: String,
    /// From spawning the process to the first correct answer, ms.
    pub ms: f64,
}

/// Whether a workload was answered correctly.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// The workload.
    pub workload: Workload,
    /// Correct.
    pub ok: bool,
    /// What was wrong.
    pub detail: String,
}

/// One fixed-rate run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Run {
    /// The workload.
    pub workload: Workload,
    /// The rate asked for, requests per second.
    pub rate: f64,
    /// Correct answers per second over the recorded part.
    pub achieved_rate: f64,
    /// Latency from the time each request was due (coordinated omission corrected), µs.
    pub latency: Summary,
    /// p99 from the time each request was sent, µs: what a closed-loop tool would report.
    pub uncorrected_p99: f64,
    /// Correct answers recorded.
    pub ok: u64,
    /// Failures recorded.
    pub errors: Errors,
    /// Server CPU time (user + system, all threads) per request sent, µs.
    pub cpu_us_per_request: Option<f64>,
    /// The server's peak resident memory during the run, MiB.
    pub peak_rss_mb: f64,
    /// Its resident memory before the run, MiB.
    pub rss_before_mb: f64,
    /// The most requests outstanding at once.
    pub max_in_flight: usize,
    /// (peak − before) / max in flight, KiB: memory per concurrent request. For edgegate that
    /// is memory per live instance.
    pub memory_per_in_flight_kb: Option<f64>,
    /// Whether the load generator kept its schedule: its p99 lateness within a fifth of the
    /// workload's latency bound (see [`crate::load::LoadResult::kept_schedule`]).
    pub kept_schedule: bool,
    /// The generator's own p99 lateness, µs.
    pub dispatch_p99_us: f64,
    /// How long the run took, s.
    pub wall_s: f64,
    /// Each slice's corrected p99, µs, in the order they ran (see [`crate::lab`]).
    #[serde(default)]
    pub round_p99_us: Vec<f64>,
    /// The time the hypervisor took from the CPUs during the run (`None`: `/proc/stat` was
    /// unreadable).
    #[serde(default)]
    pub steal: Option<Steal>,
    /// The same for each slice, in the order they ran.
    #[serde(default)]
    pub round_steal: Vec<Steal>,
    /// The slices the VM left alone, merged (`None`: none was).
    #[serde(default)]
    pub calm: Option<Calm>,
}

/// The slices of a run whose p99 the VM's steal did not bound ([`Steal::bounds_p99`] false),
/// merged: the runtime's own latency, as far as the VM let it be seen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calm {
    /// How many slices.
    pub slices: usize,
    /// Their corrected latency, µs.
    pub latency: Summary,
}

/// Steal during a run: the share of the time the CPUs were runnable but the hypervisor ran
/// something else, in percent (see [`crate::procfs::CpuTimes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Steal {
    /// Of the server's CPUs (of every CPU when nothing is pinned).
    pub server_pct: f64,
    /// Of the load generator's CPUs; `None` when it shares the server's.
    pub load_pct: Option<f64>,
}

impl Steal {
    /// Above this share of requests met by a pause of the VM, a run's p99 is marked: 1 %, the
    /// share of requests above p99.
    pub const P99_BOUND_PCT: f64 = 1.0;

    /// About the share of requests that met a pause of the VM, in percent: a request waits
    /// when either its server's CPU or the generator's is taken, and on a VM such pauses last
    /// milliseconds, longer than a request.
    pub fn requests_pct(&self) -> f64 {
        self.server_pct + self.load_pct.unwrap_or(0.0)
    }

    /// Whether the p99 measures the VM's pauses as much as the runtime.
    pub fn bounds_p99(&self) -> bool {
        self.requests_pct() >= Self::P99_BOUND_PCT
    }

    /// As a table cell: server / load.
    pub fn describe(&self) -> String {
        match self.load_pct {
            Some(load) => format!("{:.1} / {load:.1}", self.server_pct),
            None => format!("{:.1}", self.server_pct),
        }
    }
}

/// One saturation search.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Saturation {
    /// The workload.
    pub workload: Workload,
    /// The p99 bound, µs.
    pub bound_us: f64,
    /// The highest rate that kept p99 under the bound with no errors; `None` if none did.
    pub rate: Option<f64>,
    /// Whether the load generator, not the server, was the limit at a failing probe.
    pub limited_by_load: bool,
    /// Every probe, in order.
    pub probes: Vec<Probe>,
}

impl Saturation {
    /// The rate as a table cell.
    pub fn describe(&self) -> String {
        match self.rate {
            Some(rate) if self.limited_by_load => {
                format!("≥ {rate:.0} rps (load generator's limit)")
            }
            Some(rate) => format!("{rate:.0} rps"),
            None => format!("none: p99 over {:.0} µs at every rate tried", self.bound_us),
        }
    }
}

/// One probe of a saturation search.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Probe {
    /// Requests per second.
    pub rate: f64,
    /// Corrected p99, µs.
    pub p99_us: f64,
    /// Failures.
    pub errors: u64,
    /// Under the bound with no errors.
    pub pass: bool,
    /// Whether the generator kept its schedule.
    pub kept_schedule: bool,
    /// How late the generator queued requests (p99), µs.
    pub lateness_p99_us: f64,
}

impl Results {
    /// Writes `results.json`, `report.md` and the charts into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        fs::create_dir_all(dir)?;
        fs::write(dir.join("results.json"), serde_json::to_string_pretty(self)?)?;
        let charts = crate::charts::write_all(self, dir)?;
        fs::write(dir.join("report.md"), self.markdown(&charts))?;
        Ok(())
    }

    fn ran(&self) -> impl Iterator<Item = &RuntimeResult> {
        self.runtimes.iter().filter(|r| r.missing.is_none())
    }

    fn result(&self, runtime: Runtime) -> Option<&RuntimeResult> {
        self.ran().find(|r| r.runtime == runtime && !r.runs.is_empty())
    }

    /// The workloads that were run by anyone, in report order.
    pub fn workloads(&self) -> Vec<Workload> {
        Workload::ALL
            .into_iter()
            .filter(|w| self.ran().any(|r| r.runs.iter().any(|run| run.workload == *w)))
            .collect()
    }

    /// The rates `workload` ran at, ascending.
    pub fn rates(&self, workload: Workload) -> Vec<f64> {
        let mut rates: Vec<f64> = self
            .ran()
            .flat_map(|r| r.runs.iter())
            .filter(|r| r.workload == workload)
            .map(|r| r.rate)
            .collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        rates
    }

    /// The runtimes that produced runs.
    pub fn measured(&self) -> impl Iterator<Item = &RuntimeResult> {
        self.ran().filter(|r| !r.runs.is_empty())
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
        let _ = writeln!(
            w,
            "- saturation: the highest rate whose p99 stays under {:.0} µs ({:.0} ms for image-resize and mixed) with no errors; a rate fails when two probes at it fail\n",
            m.bounds_us.0,
            m.bounds_us.1 / 1000.0
        );
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
        for workload in self.workloads() {
            let _ = writeln!(w, "\n## {}\n", workload.name());
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
                    let _ = writeln!(
                        w,
                        "| {} | {rate:.0} | {:.0}{flag} | {:.0} | {:.0} | {:.0}{paused} | {:.0} | {:.0} | {:.0} | {} | {} | {:.1} | {} | {} |",
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
                "\nCalm p99: the p99 of the run's slices whose steal stayed under {:.0} %, merged, and how many of its slices those were; – when none did. A runtime's own tail, as far as the VM let it be seen. Steal falls only on time a CPU wants to run, so a runtime that needs more CPU, or wakes its CPU more often, meets more of it and may have fewer calm slices.",
                Steal::P99_BOUND_PCT
            );
        }
        let _ = writeln!(
            w,
            "\n## Cold start\n\nFrom spawning the process to its first correct answer (the second start of each, files in the page cache).\n"
        );
        let _ = writeln!(w, "| runtime | start | ms |\n|---|---|---|");
        for r in self.measured() {
            for c in &r.cold_start {
                let _ = writeln!(w, "| {} | {} | {:.1} |", r.runtime.name(), c.what, c.ms);
            }
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
        self.cross_checks(w);
        let _ =
            writeln!(w, "\n## Decision matrix: Wasm (edgegate) against V8 (Node.js, workerd)\n");
        self.decision_matrix(w);
        if !charts.is_empty() {
            let _ = writeln!(w, "\n## Charts\n");
            for chart in charts {
                let _ = writeln!(w, "![{chart}]({chart})");
            }
        }
        out
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

    /// Rows measured here replace opinion; rows that were not measured say so.
    fn decision_matrix(&self, w: &mut String) {
        let edgegate = self.result(Runtime::Edgegate);
        let v8: Vec<&RuntimeResult> =
            [Runtime::Node, Runtime::Workerd].into_iter().filter_map(|r| self.result(r)).collect();
        let _ = writeln!(
            w,
            "| question | edgegate | best V8 | verdict | source |\n|---|---|---|---|---|"
        );
        let Some(edgegate) = edgegate else {
            let _ = writeln!(w, "| (edgegate did not run: nothing to compare) | | | | |");
            return;
        };
        // One measured row: `metric` of edgegate against the best V8 runtime's, "best" being the
        // lowest or the highest as `lower_wins` says; "not measured" where either is missing.
        let row = |w: &mut String,
                   question: &str,
                   metric: &dyn Fn(&RuntimeResult) -> Option<f64>,
                   unit: &str,
                   lower_wins: bool| {
            let ours = metric(edgegate);
            let theirs = v8
                .iter()
                .filter_map(|r| Some((metric(r)?, r.runtime)))
                .min_by(|a, b| if lower_wins { a.0.total_cmp(&b.0) } else { b.0.total_cmp(&a.0) });
            let verdict = match (ours, theirs) {
                (Some(a), Some((b, _))) if b > 0.0 && a > 0.0 => {
                    let ratio = a / b;
                    let better = if lower_wins { ratio < 1.0 } else { ratio > 1.0 };
                    format!("{} ({ratio:.2}×)", if better { "Wasm" } else { "V8" })
                }
                _ => "not measured".into(),
            };
            let ours = ours.map_or("–".to_string(), |v| format!("{v:.1} {unit}"));
            let theirs =
                theirs.map_or("–".into(), |(v, rt)| format!("{v:.1} {unit} ({})", rt.name()));
            let _ = writeln!(w, "| {question} | {ours} | {theirs} | {verdict} | measured |");
        };
        for workload in self.workloads() {
            let Some(&rate) = self.rates(workload).first() else { continue };
            let name = workload.name();
            let p99 = |r: &RuntimeResult| r.run(workload, rate).map(|run| run.latency.p99);
            row(w, &format!("p99 latency, {name} at {rate:.0} rps"), &p99, "µs", true);
            let cpu =
                |r: &RuntimeResult| r.run(workload, rate).and_then(|run| run.cpu_us_per_request);
            row(w, &format!("server CPU per request, {name}"), &cpu, "µs", true);
            if edgegate.saturation_of(workload).is_some() {
                let sat = |r: &RuntimeResult| r.saturation_of(workload).and_then(|s| s.rate);
                row(w, &format!("saturation rate, {name}"), &sat, "rps", false);
            }
        }
        let start = |r: &RuntimeResult| {
            r.cold_start
                .iter()
                .find(|c| c.what == "start" || c.what == "start, modules cached")
                .map(|c| c.ms)
        };
        row(w, "cold start, process to first answer", &start, "ms", true);
        row(w, "resident memory after start", &|r| r.idle_rss_mb, "MiB", true);
        let _ = writeln!(
            w,
            "| isolation between requests | a fresh instance per request | an isolate reused across requests | Wasm | design (docs/architecture.md), not measured |"
        );
        let _ = writeln!(
            w,
            "| garbage-collection pauses | none (no GC; a bump arena dropped with the instance) | V8's GC | Wasm | design, not measured |"
        );
        let _ = writeln!(
            w,
            "| worker languages and libraries | Rust (no_std guest) | JavaScript and npm | V8 | opinion, not measured |"
        );
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

    fn round(wrk: (f64, f64), lab: (f64, f64)) -> CrossRound {
        let p = |(p50, p99)| Percentiles { p50, p99 };
        CrossRound {
            lab_rate: 1000.0,
            wrk_rate: 1000.0,
            wrk: p(wrk),
            lab: p(lab),
            lab_sent: p(lab),
            steal: None,
        }
    }

    fn check(rounds: Vec<CrossRound>) -> CrossCheck {
        CrossCheck {
            url: "http://127.0.0.1:1/kv/user:1".into(),
            connections: 2,
            lab_connections: 32,
            rounds,
        }
    }

    #[test]
    fn the_cross_check_compares_medians_of_the_rounds() {
        // One wild round of each tool does not move the medians.
        let c = check(vec![
            round((100.0, 400.0), (110.0, 430.0)),
            round((100.0, 5000.0), (105.0, 420.0)),
            round((100.0, 420.0), (900.0, 9000.0)),
        ]);
        let wrk = c.median(|r| r.wrk);
        let lab = c.median(|r| r.lab);
        assert_eq!((wrk.p50, wrk.p99), (100.0, 420.0));
        assert_eq!((lab.p50, lab.p99), (110.0, 430.0));
        assert!(lab.agrees_with(&wrk));
        // An even count takes the mean of the middle two.
        let even =
            check(vec![round((100.0, 400.0), (0.0, 0.0)), round((120.0, 600.0), (0.0, 0.0))]);
        assert_eq!(even.median(|r| r.wrk).p50, 110.0);
    }

    #[test]
    fn the_cross_check_fails_when_either_percentile_is_off() {
        let p99_off = check(vec![round((100.0, 400.0), (105.0, 470.0))]);
        let agrees = |c: &CrossCheck| c.median(|r| r.lab).agrees_with(&c.median(|r| r.wrk));
        assert!(!agrees(&p99_off), "p99 is 17.5 % over");
        let p50_off = check(vec![round((100.0, 400.0), (84.0, 400.0))]);
        assert!(!agrees(&p50_off), "p50 is 16 % under");
        let within = check(vec![round((100.0, 400.0), (114.0, 341.0))]);
        assert!(agrees(&within));
    }

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
    fn steal_bounds_the_p99_when_the_vm_paused_a_hundredth_of_requests() {
        let steal = |server_pct, load_pct| Steal { server_pct, load_pct };
        // Either side's pause delays a request: the two add up.
        assert!(steal(0.6, Some(0.5)).bounds_p99());
        assert!(!steal(0.6, Some(0.3)).bounds_p99());
        // Not pinned, the one figure covers both.
        assert!(!steal(0.9, None).bounds_p99());
        assert!(steal(1.0, None).bounds_p99());
        assert_eq!(steal(0.64, Some(12.25)).describe(), "0.6 / 12.2");
        assert_eq!(steal(3.0, None).describe(), "3.0");
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
