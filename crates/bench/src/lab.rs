//! The lab: for each runtime, start it (timing the start), check that it answers every
//! workload correctly, load it at fixed rates, search for its saturation rate, and collect
//! it all into [`Results`].
//!
//! ```text
//!  for runtime:  prepare ─▶ start ×2 (cold start) ─▶ check answers ─▶ fixed-rate runs
//!                  │ missing: reported, skipped                  ─▶ saturation search ─▶ stop
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use crate::affinity::CpuPlan;
use crate::load::{self, LoadSpec, RequestTemplate};
use crate::procfs;
use crate::report::{
    Check, ColdStart, CrossCheck, CrossRound, Meta, Percentiles, Probe, Results, Run,
    RuntimeResult, Saturation,
};
use crate::runtimes::{Environment, Prepared, Runtime, Server};
use crate::workload::{Expect, Fixtures, Workload};

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `quick` or `full`, for the report.
    pub mode: String,
    /// The runtimes, in order.
    pub runtimes: Vec<Runtime>,
    /// The workloads, in order.
    pub workloads: Vec<Workload>,
    /// Fixed rates of the light workloads (requests per second).
    pub rates: Vec<f64>,
    /// Fixed rates of the heavy ones (image-resize, mixed).
    pub heavy_rates: Vec<f64>,
    /// Warm-up before each run, not recorded.
    pub warmup: Duration,
    /// Recorded part of each fixed-rate run.
    pub duration: Duration,
    /// Keep-alive connections.
    pub connections: usize,
    /// Workloads to search the saturation rate of.
    pub saturate: Vec<Workload>,
    /// Warm-up and recorded time of each saturation probe.
    pub probe: (Duration, Duration),
    /// Bisection steps after the first failing rate.
    pub bisect_steps: u32,
    /// The p99 a light workload must stay under to count as not saturated.
    pub bound: Duration,
    /// The same for a heavy one.
    pub heavy_bound: Duration,
    /// Pin load and server to separate CPUs.
    pub pin: bool,
    /// The command line, for the report.
    pub command: String,
    /// Cross-check the lab against this outside load tool (wrk), when set.
    pub wrk: Option<std::path::PathBuf>,
}

impl Plan {
    /// The quick plan: one rate per workload, a short saturation search for db-lookup; under
    /// two minutes for all four runtimes on two cores.
    pub fn quick() -> Self {
        Self {
            mode: "quick".into(),
            runtimes: Runtime::ALL.to_vec(),
            workloads: Workload::ALL.to_vec(),
            rates: vec![2000.0],
            heavy_rates: vec![10.0],
            warmup: Duration::from_millis(400),
            duration: Duration::from_millis(1200),
            connections: 32,
            saturate: vec![Workload::DbLookup],
            probe: (Duration::from_millis(200), Duration::from_millis(800)),
            bisect_steps: 2,
            bound: Duration::from_millis(1),
            heavy_bound: Duration::from_millis(100),
            pin: true,
            command: String::new(),
            wrk: None,
        }
    }

    /// The full plan: 2k, 5k and 10k requests per second (5, 10 and 20 for the heavy
    /// workloads), 10 s each after 2 s of warm-up, and a saturation search for every
    /// workload.
    pub fn full() -> Self {
        Self {
            mode: "full".into(),
            rates: vec![2000.0, 5000.0, 10000.0],
            heavy_rates: vec![5.0, 10.0, 20.0],
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(10),
            saturate: Workload::ALL.to_vec(),
            probe: (Duration::from_secs(1), Duration::from_secs(3)),
            bisect_steps: 4,
            ..Self::quick()
        }
    }

    fn rates_of(&self, workload: Workload) -> &[f64] {
        if workload.heavy() { &self.heavy_rates } else { &self.rates }
    }

    fn bound_of(&self, workload: Workload) -> Duration {
        if workload.heavy() { self.heavy_bound } else { self.bound }
    }

    /// How late the generator may queue requests and still count as keeping its schedule: a
    /// fifth of the latency bound (200 µs for the light workloads). Sending 2 MB pictures, the
    /// generator is busier, and a millisecond does not matter against 100.
    fn slack_of(&self, workload: Workload) -> Duration {
        self.bound_of(workload) / 5
    }

    /// About how many steps the progress bar counts.
    fn steps(&self) -> u64 {
        let runs: usize = self.workloads.iter().map(|&w| self.rates_of(w).len()).sum();
        let probes = self.saturate.iter().filter(|w| self.workloads.contains(w)).count()
            * (6 + self.bisect_steps as usize);
        (self.runtimes.len() * (1 + runs + probes)) as u64
    }
}

/// Runs `plan`, with a progress bar on a terminal and one line per finished step either way.
pub fn run(plan: &Plan, env: &Environment, cpus: &CpuPlan) -> anyhow::Result<Results> {
    let fixtures = Fixtures::generate();
    let progress = ProgressBar::new(plan.steps());
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let say = |line: String| {
        if progress.is_hidden() {
            eprintln!("{line}");
        } else {
            progress.println(line);
        }
    };
    let mut results = Results { meta: Meta::collect(plan, cpus), runtimes: Vec::new() };
    for &runtime in &plan.runtimes {
        progress.set_message(format!("{}: starting", runtime.name()));
        let result = match env.prepare(runtime, &fixtures) {
            Err(missing) => {
                say(format!("{}: MISSING: {missing}", runtime.name()));
                RuntimeResult::missing(runtime, missing)
            }
            Ok(prepared) => {
                let mut lab = RuntimeLab {
                    plan,
                    env,
                    cpus,
                    fixtures: &fixtures,
                    progress: &progress,
                    say: &say,
                };
                lab.measure(&prepared).unwrap_or_else(|e| {
                    say(format!("{}: FAILED: {e:#}", runtime.name()));
                    RuntimeResult::failed(runtime, prepared.version.clone(), format!("{e:#}"))
                })
            }
        };
        results.runtimes.push(result);
    }
    progress.finish_and_clear();
    Ok(results)
}

struct RuntimeLab<'a, F: Fn(String)> {
    plan: &'a Plan,
    env: &'a Environment,
    cpus: &'a CpuPlan,
    fixtures: &'a Fixtures,
    progress: &'a ProgressBar,
    say: &'a F,
}

const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Rounds of the cross-check, each one run of wrk and one of the lab.
const CROSS_CHECK_ROUNDS: usize = 4;

/// How long each wrk connection waits after an answer, in the cross-check.
const WRK_PAUSE_MS: u64 = 2;

/// wrk's script for the cross-check: pace each connection, print the figures as JSON (µs).
const WRK_SCRIPT: &str = r#"-- Written by `edgegate bench --cross-check`.
local pause_ms = tonumber(os.getenv("WRK_PAUSE_MS") or "2")
function delay() return pause_ms end
done = function(summary, latency, requests)
  io.write(string.format('{"requests":%d,"duration_us":%d,"p50":%d,"p99":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99)))
end
"#;

impl<F: Fn(String)> RuntimeLab<'_, F> {
    fn measure(&mut self, prepared: &Prepared) -> anyhow::Result<RuntimeResult> {
        let runtime = prepared.runtime;
        let name = runtime.name();
        let mut result = RuntimeResult::new(runtime, Some(prepared.version.clone()));
        let probe = &self.fixtures.requests(Workload::StaticJson)[0].0;
        let server = self.cold_starts(prepared, probe, &mut result.cold_start)?;
        for start in &result.cold_start {
            (self.say)(format!("{name}: {}: {:.1} ms", start.what, start.ms));
        }
        self.progress.inc(1);
        result.idle_rss_mb = procfs::sample(server.pid()).ok().map(|s| mb(s.rss));

        for &workload in &self.plan.workloads {
            let requests = self.fixtures.requests(workload);
            let check = check_answers(server.addr, &requests);
            let ok = check.is_ok();
            result.checks.push(Check { workload, ok, detail: check.err().unwrap_or_default() });
            if !ok {
                (self.say)(format!("{name}: {}: WRONG ANSWER, not measured", workload.name()));
                continue;
            }
            let templates: Arc<[RequestTemplate]> = requests.into_iter().map(|(t, _)| t).collect();
            for &rate in self.plan.rates_of(workload) {
                self.progress.set_message(format!("{name} {} @ {rate} rps", workload.name()));
                let run = self.fixed_rate(&server, workload, &templates, rate)?;
                (self.say)(format!(
                    "{name} {} @ {rate} rps: p50 {:.0} µs, p99 {:.0} µs, {} errors, {:.1} µs CPU/req",
                    workload.name(),
                    run.latency.p50,
                    run.latency.p99,
                    run.errors.total(),
                    run.cpu_us_per_request.unwrap_or(f64::NAN),
                ));
                result.runs.push(run);
                self.progress.inc(1);
            }
            if self.plan.saturate.contains(&workload) {
                let s = self.saturation(&server, workload, &templates)?;
                (self.say)(format!("{name} {}: saturation {}", workload.name(), s.describe()));
                result.saturation.push(s);
            }
        }
        if let Some(wrk) = &self.plan.wrk {
            self.progress.set_message(format!("{name}: cross-check with wrk"));
            let check = self.cross_check(&server, wrk)?;
            let (wrk, lab, sent) = check.medians();
            (self.say)(format!(
                "{name}: cross-check, medians of {} rounds: p50 lab {:.0} µs ({:.0} from the \
                 send), wrk {:.0} µs; p99 lab {:.0} µs ({:.0}), wrk {:.0} µs",
                check.rounds.len(),
                lab.p50,
                sent.p50,
                wrk.p50,
                lab.p99,
                sent.p99,
                wrk.p99
            ));
            result.cross_check = Some(check);
        }
        server.stop();
        Ok(result)
    }

    /// The same endpoint (`GET /kv/user:1`) measured by wrk (Debian's, a lean C client) and
    /// by the lab **at the same time**, each at about half the first fixed rate on its own
    /// connections, in [`CROSS_CHECK_ROUNDS`] rounds: the VM's hiccups, which move a p99 2–3×
    /// between runs a minute apart, then fall on both tools alike. wrk has no constant-rate
    /// mode: each connection pauses [`WRK_PAUSE_MS`] after each answer (its Lua `delay()`),
    /// so `rate × pause` connections give about the rate. A short wrk run first finds the
    /// rate wrk reaches; each round's lab runs at the rate wrk reached in the round before.
    fn cross_check(&self, server: &Server, wrk: &std::path::Path) -> anyhow::Result<CrossCheck> {
        let (template, _) = self.fixtures.requests(Workload::DbLookup).swap_remove(0);
        let url = format!("http://{}{}", server.addr, template.uri);
        let half = self.plan.rates.first().copied().unwrap_or(2000.0) / 2.0;
        let connections = ((half * WRK_PAUSE_MS as f64 / 1000.0).round() as usize).max(1);
        let script = self.env.work.join("cross-check.lua");
        std::fs::write(&script, WRK_SCRIPT)?;
        let start_wrk = |duration: Duration| -> anyhow::Result<std::process::Child> {
            self.cpus
                .spawn_load(
                    std::process::Command::new(wrk)
                        .args(["-t1", "-c", &connections.to_string(), "-d"])
                        .arg(format!("{}s", duration.as_secs().max(1)))
                        .arg("-s")
                        .arg(&script)
                        .arg(&url)
                        .env("WRK_PAUSE_MS", WRK_PAUSE_MS.to_string())
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped()),
                )
                .with_context(|| format!("starting {}", wrk.display()))
        };
        let (mut rate, _) = wrk_result(start_wrk(Duration::from_secs(3))?)?;
        let templates: Arc<[RequestTemplate]> = Arc::from(vec![template]);
        // wrk runs a second longer on each side of the lab's recorded window.
        let wrk_duration = self.plan.warmup + self.plan.duration + Duration::from_secs(2);
        let mut rounds = Vec::with_capacity(CROSS_CHECK_ROUNDS);
        for _ in 0..CROSS_CHECK_ROUNDS {
            let mut spec = self.spec(server, rate, self.plan.warmup, self.plan.duration);
            spec.connections = connections;
            let running = start_wrk(wrk_duration)?;
            std::thread::sleep(Duration::from_secs(1));
            let lab = load::run(&spec, &templates, &self.cpus.load);
            let (wrk_rate, wrk) = wrk_result(running)?;
            let lab = lab?;
            rounds.push(CrossRound {
                lab_rate: rate,
                wrk_rate,
                wrk,
                lab: lab.corrected.summary().into(),
                lab_sent: lab.uncorrected.summary().into(),
            });
            // The next round's lab runs at the rate wrk reached in this one.
            rate = wrk_rate;
        }
        Ok(CrossCheck { url, connections, rounds })
    }

    /// Starts the runtime twice (the second start, with the files in the page cache, is the
    /// one reported for every runtime); edgegate also once with an empty module cache and once
    /// after a new version of one module. Returns the last server, still running.
    fn cold_starts(
        &self,
        prepared: &Prepared,
        probe: &RequestTemplate,
        out: &mut Vec<ColdStart>,
    ) -> anyhow::Result<Server> {
        let mut start = |what: &str| -> anyhow::Result<Server> {
            let server = prepared.start(self.cpus, probe, START_TIMEOUT)?;
            out.push(ColdStart { what: what.into(), ms: ms(server.started_in) });
            Ok(server)
        };
        if prepared.runtime == Runtime::Edgegate {
            self.env.clear_module_cache()?;
            start("first start, no module compiled yet")?.stop();
            start("start, modules cached")?.stop();
            self.env.deploy_echo_json(1).map_err(anyhow::Error::msg)?;
            start("start after a new echo-json version (it compiles, the rest are cached)")
        } else {
            prepared.start(self.cpus, probe, START_TIMEOUT)?.stop();
            start("start")
        }
    }

    fn spec(&self, server: &Server, rate: f64, warmup: Duration, duration: Duration) -> LoadSpec {
        LoadSpec {
            addr: server.addr,
            rate,
            warmup,
            duration,
            connections: self.plan.connections,
            timeout: Duration::from_secs(5),
        }
    }

    fn fixed_rate(
        &self,
        server: &Server,
        workload: Workload,
        templates: &Arc<[RequestTemplate]>,
        rate: f64,
    ) -> anyhow::Result<Run> {
        let spec = self.spec(server, rate, self.plan.warmup, self.plan.duration);
        measured_run(server, workload, &spec, templates, self.cpus, self.plan.slack_of(workload))
    }

    /// Doubles the rate from the first fixed rate until the p99 passes the bound (or errors
    /// appear), then bisects between the last good and the first bad rate.
    fn saturation(
        &self,
        server: &Server,
        workload: Workload,
        templates: &Arc<[RequestTemplate]>,
    ) -> anyhow::Result<Saturation> {
        let bound = self.plan.bound_of(workload);
        let (warmup, duration) = self.plan.probe;
        let mut s =
            Saturation { workload, bound_us: bound.as_secs_f64() * 1e6, ..Saturation::default() };
        let mut probe = |rate: f64| -> anyhow::Result<bool> {
            self.progress.set_message(format!("{} saturation @ {rate:.0} rps", workload.name()));
            let spec = self.spec(server, rate, warmup, duration);
            let result = load::run(&spec, templates, &self.cpus.load)?;
            let expected = rate * duration.as_secs_f64();
            let p99 = result.corrected.summary().p99;
            let pass = result.errors.total() == 0
                && result.ok as f64 >= expected * 0.95
                && p99 <= s.bound_us;
            let kept = result.kept_schedule(self.plan.slack_of(workload));
            s.probes.push(Probe {
                rate,
                p99_us: p99,
                errors: result.errors.total(),
                pass,
                kept_schedule: kept,
                lateness_p99_us: result.dispatch_lateness.summary().p99,
            });
            self.progress.inc(1);
            // Idle a moment, so one probe's backlog does not spill into the next.
            std::thread::sleep(Duration::from_millis(200));
            Ok(pass)
        };
        let start = self.plan.rates_of(workload).first().copied().unwrap_or(1000.0);
        let cap = if workload.heavy() { 5_000.0 } else { 500_000.0 };
        let (mut good, mut bad) = (None, None);
        let mut rate = start;
        // Up from the first rate, or down from it when it already fails.
        if probe(rate)? {
            good = Some(rate);
            while rate < cap {
                rate *= 2.0;
                if probe(rate)? {
                    good = Some(rate);
                } else {
                    bad = Some(rate);
                    break;
                }
            }
        } else {
            bad = Some(rate);
            while rate > 1.0 {
                rate /= 2.0;
                if probe(rate)? {
                    good = Some(rate);
                    break;
                }
                bad = Some(rate);
            }
        }
        if let (Some(mut lo), Some(mut hi)) = (good, bad) {
            for _ in 0..self.plan.bisect_steps {
                let mid = ((lo + hi) / 2.0).round();
                if mid <= lo || mid >= hi {
                    break;
                }
                if probe(mid)? { lo = mid } else { hi = mid }
            }
            good = Some(lo);
        }
        s.rate = good;
        // When the generator itself fell behind at the lowest failing rate, the server's limit
        // may be above what was measured.
        s.limited_by_load = s
            .probes
            .iter()
            .filter(|p| !p.pass)
            .min_by(|a, b| a.rate.total_cmp(&b.rate))
            .is_some_and(|p| !p.kept_schedule);
        Ok(s)
    }
}

/// One fixed-rate run with the server's CPU and memory read around it.
pub fn measured_run(
    server: &Server,
    workload: Workload,
    spec: &LoadSpec,
    templates: &Arc<[RequestTemplate]>,
    cpus: &CpuPlan,
    slack: Duration,
) -> anyhow::Result<Run> {
    let pid = server.pid();
    let _ = procfs::reset_peak(pid);
    let before = procfs::sample(pid)?;
    let started = Instant::now();
    let result = load::run(spec, templates, &cpus.load)?;
    let elapsed = started.elapsed();
    let after = procfs::sample(pid)?;
    // Every request sent (warm-up included) cost CPU; charge it over all of them.
    let sent = spec.rate * (spec.warmup + spec.duration).as_secs_f64();
    let cpu = (after.cpu - before.cpu).as_secs_f64();
    let summary = result.corrected.summary();
    let grown = after.peak_rss.saturating_sub(before.rss);
    Ok(Run {
        workload,
        rate: spec.rate,
        achieved_rate: result.ok as f64 / spec.duration.as_secs_f64(),
        uncorrected_p99: result.uncorrected.summary().p99,
        latency: summary,
        ok: result.ok,
        errors: result.errors,
        cpu_us_per_request: (sent > 0.0).then(|| cpu * 1e6 / sent),
        peak_rss_mb: mb(after.peak_rss),
        rss_before_mb: mb(before.rss),
        max_in_flight: result.max_in_flight,
        memory_per_in_flight_kb: (result.max_in_flight > 0)
            .then(|| grown as f64 / 1024.0 / result.max_in_flight as f64),
        kept_schedule: result.kept_schedule(slack),
        dispatch_p99_us: result.dispatch_lateness.summary().p99,
        wall_s: elapsed.as_secs_f64(),
    })
}

/// Waits for wrk and reads the rate and the percentiles (µs) its script printed.
fn wrk_result(wrk: std::process::Child) -> anyhow::Result<(f64, Percentiles)> {
    let out = wrk.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "wrk failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line =
        stdout.lines().rev().find(|l| l.starts_with('{')).context("no result line from wrk")?;
    let json: serde_json::Value = serde_json::from_str(line).context("reading wrk's result")?;
    let number = |k: &str| json[k].as_f64().with_context(|| format!("wrk's result has no {k}"));
    let rate = number("requests")? / (number("duration_us")? / 1e6);
    Ok((rate, Percentiles { p50: number("p50")?, p99: number("p99")? }))
}

/// Sends every request once and checks each answer.
fn check_answers(
    addr: std::net::SocketAddr,
    requests: &[(RequestTemplate, Expect)],
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    for (template, expect) in requests {
        let (status, body) = runtime
            .block_on(load::request_once(addr, template))
            .map_err(|e| format!("{} {}: {e:#}", template.method, template.uri))?;
        expect
            .check(status, &body)
            .map_err(|e| format!("{} {}: {e}", template.method, template.uri))?;
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
