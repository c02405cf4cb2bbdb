//! The lab: start every runtime (timing the start) and check that it answers every workload
//! correctly; load them at fixed rates, **interleaved**; then, one runtime at a time, search
//! for its saturation rate and cross-check it; collect it all into [`Results`].
//!
//! ```text
//!  for runtime:  prepare ─▶ start ×2 (cold start) ─▶ check answers ─▶ pause (SIGSTOP)
//!                  │ missing: reported, skipped
//!  for workload, rate, round:  for runtime (rotated):  resume ─▶ one slice ─▶ pause
//!  for runtime:  resume ─▶ saturation search ─▶ cross-check ─▶ stop
//! ```
//!
//! A fixed-rate run is [`Plan::rounds`] slices per runtime, the runtimes taking turns (the
//! order rotates each round), merged into one histogram per runtime. This VM's background
//! noise changes over minutes: measured one after the other, two runtimes saw different
//! machines and a p99 ratio between them moved 0.3–2.5× from one run to the next. Taking
//! turns, every runtime samples the same stretch of time. The runtimes not being measured
//! are stopped (SIGSTOP), so an idle runtime's timers take nothing from the one that is.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use crate::affinity::CpuPlan;
use crate::latency::Latencies;
use crate::load::{self, LoadResult, LoadSpec, RequestTemplate};
use crate::procfs::{self, CpuTimes};
use crate::report::{
    Calm, Check, ColdStart, CrossCheck, CrossRound, Meta, Percentiles, Probe, Results, Run,
    RuntimeResult, Saturation, Steal,
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
    /// Slices each fixed-rate run is cut into, the runtimes taking turns (one continuous run
    /// when only one runtime is measured).
    pub rounds: usize,
    /// Keep-alive connections.
    pub connections: usize,
    /// Workloads to search the saturation rate of.
    pub saturate: Vec<Workload>,
    /// Warm-up and recorded time of each saturation probe.
    pub probe: (Duration, Duration),
    /// Bisection steps after the first failing rate.
    pub bisect_steps: u32,
    /// When the first rate fails, the search halves down to the first rate over this.
    pub search_down: u32,
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
            rounds: 1,
            connections: 32,
            saturate: vec![Workload::DbLookup],
            probe: (Duration::from_millis(200), Duration::from_millis(800)),
            bisect_steps: 1,
            search_down: 4,
            bound: Duration::from_millis(1),
            heavy_bound: Duration::from_millis(100),
            pin: true,
            command: String::new(),
            wrk: None,
        }
    }

    /// The full plan: 2k, 5k and 10k requests per second (5, 10 and 20 for the heavy
    /// workloads), 10 s each in five 2 s slices (2 s of warm-up before the first, 0.4 s before
    /// each of the others), and a saturation search for every workload.
    pub fn full() -> Self {
        Self {
            mode: "full".into(),
            rates: vec![2000.0, 5000.0, 10000.0],
            heavy_rates: vec![5.0, 10.0, 20.0],
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(10),
            rounds: 5,
            saturate: Workload::ALL.to_vec(),
            probe: (Duration::from_secs(1), Duration::from_secs(3)),
            bisect_steps: 4,
            search_down: 16,
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
        (self.runtimes.len() * (1 + runs * self.rounds.max(1) + probes)) as u64
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
    let lab = Lab { plan, env, cpus, fixtures: &fixtures, progress: &progress, say: &say };
    let mut results = Results { meta: Meta::collect(plan, cpus), runtimes: Vec::new() };
    // Every runtime that starts and answers, paused until its turn; with its result's index.
    let mut servers: Vec<(usize, Server)> = Vec::new();
    for &runtime in &plan.runtimes {
        progress.set_message(format!("{}: starting", runtime.name()));
        let result = match env.prepare(runtime, &fixtures) {
            Err(missing) => {
                say(format!("{}: MISSING: {missing}", runtime.name()));
                RuntimeResult::missing(runtime, missing)
            }
            Ok(prepared) => match lab.start(&prepared) {
                Ok((result, server)) => {
                    server.pause();
                    servers.push((results.runtimes.len(), server));
                    result
                }
                Err(e) => {
                    say(format!("{}: FAILED: {e:#}", runtime.name()));
                    RuntimeResult::failed(runtime, prepared.version.clone(), format!("{e:#}"))
                }
            },
        };
        results.runtimes.push(result);
    }
    results.meta.rounds = if servers.len() > 1 { plan.rounds.max(1) } else { 1 };
    lab.fixed_rates(&mut results.runtimes, &mut servers);
    for (index, server) in servers {
        let result = &mut results.runtimes[index];
        server.resume();
        if let Err(e) = lab.searches(&server, result) {
            say(format!("{}: FAILED: {e:#}", result.runtime.name()));
            result.failed = Some(format!("{e:#}"));
        }
        server.stop();
    }
    progress.finish_and_clear();
    Ok(results)
}

struct Lab<'a, F: Fn(String)> {
    plan: &'a Plan,
    env: &'a Environment,
    cpus: &'a CpuPlan,
    fixtures: &'a Fixtures,
    progress: &'a ProgressBar,
    say: &'a F,
}

const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The fewest requests due in one slice of a fixed-rate run: a run too short for its rate
/// gets fewer slices.
const MIN_SLICE: f64 = 10.0;

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

impl<F: Fn(String)> Lab<'_, F> {
    /// Starts `prepared` (timing its cold starts), reads its idle memory and checks its
    /// answer to every workload. Returns the server, running.
    fn start(&self, prepared: &Prepared) -> anyhow::Result<(RuntimeResult, Server)> {
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
            let check = check_answers(server.addr, &self.fixtures.requests(workload));
            let ok = check.is_ok();
            result.checks.push(Check { workload, ok, detail: check.err().unwrap_or_default() });
            if !ok {
                (self.say)(format!("{name}: {}: WRONG ANSWER, not measured", workload.name()));
            }
        }
        Ok((result, server))
    }

    fn templates(&self, workload: Workload) -> Arc<[RequestTemplate]> {
        self.fixtures.requests(workload).into_iter().map(|(t, _)| t).collect()
    }

    /// Every workload at every fixed rate: each runtime that answered it correctly gets
    /// [`Plan::rounds`] slices of the run, taking turns with the others (the order rotates
    /// each round), and its slices are merged. A runtime that fails is marked so and dropped.
    fn fixed_rates(&self, results: &mut [RuntimeResult], servers: &mut Vec<(usize, Server)>) {
        for &workload in &self.plan.workloads {
            let templates = self.templates(workload);
            for &rate in self.plan.rates_of(workload) {
                let turns: Vec<&(usize, Server)> = servers
                    .iter()
                    .filter(|(index, _)| {
                        let r = &results[*index];
                        r.failed.is_none()
                            && r.checks.iter().any(|c| c.workload == workload && c.ok)
                    })
                    .collect();
                let rounds = match turns.len() {
                    0 | 1 => 1,
                    // At least MIN_SLICE requests due in each slice.
                    _ => {
                        let due = rate * self.plan.duration.as_secs_f64();
                        self.plan.rounds.clamp(1, ((due / MIN_SLICE) as usize).max(1))
                    }
                };
                let mut gathered = vec![Some(Gathered::default()); turns.len()];
                for round in 0..rounds {
                    for turn in 0..turns.len() {
                        let k = (turn + round) % turns.len();
                        let (index, server) = turns[k];
                        let Some(into) = &mut gathered[k] else { continue };
                        let name = results[*index].runtime.name();
                        self.progress.set_message(format!(
                            "{name} {} @ {rate} rps, round {} of {rounds}",
                            workload.name(),
                            round + 1
                        ));
                        // The first slice warms up fully; the later ones only reconnect.
                        let warmup = match round {
                            0 => self.plan.warmup,
                            _ => self.plan.warmup / rounds as u32,
                        };
                        let spec =
                            self.spec(server, rate, warmup, self.plan.duration / rounds as u32);
                        server.resume();
                        let slice = into.add(server, &spec, &templates, self.cpus);
                        server.pause();
                        if let Err(e) = slice {
                            (self.say)(format!("{name}: FAILED: {e:#}"));
                            results[*index].failed = Some(format!("{e:#}"));
                            gathered[k] = None;
                        }
                        self.progress.inc(1);
                    }
                }
                for (&(index, _), gathered) in turns.iter().zip(gathered) {
                    let Some(gathered) = gathered else { continue };
                    let run = gathered.finish(workload, rate, self.plan.slack_of(workload));
                    (self.say)(format!(
                        "{} {} @ {rate} rps: p50 {:.0} µs, p99 {:.0} µs, {} errors, {:.1} µs CPU/req, steal {} %",
                        results[*index].runtime.name(),
                        workload.name(),
                        run.latency.p50,
                        run.latency.p99,
                        run.errors.total(),
                        run.cpu_us_per_request.unwrap_or(f64::NAN),
                        run.steal.map_or("unknown".into(), |s| s.describe()),
                    ));
                    results[*index].runs.push(run);
                }
            }
        }
        servers.retain(|(index, _)| results[*index].failed.is_none());
    }

    /// One runtime on its own: the saturation searches, then the cross-check.
    fn searches(&self, server: &Server, result: &mut RuntimeResult) -> anyhow::Result<()> {
        let name = result.runtime.name();
        for &workload in &self.plan.workloads {
            let answered = result.checks.iter().any(|c| c.workload == workload && c.ok);
            if !answered || !self.plan.saturate.contains(&workload) {
                continue;
            }
            let s = self.saturation(server, workload, &self.templates(workload))?;
            (self.say)(format!("{name} {}: saturation {}", workload.name(), s.describe()));
            result.saturation.push(s);
        }
        if let Some(wrk) = &self.plan.wrk {
            self.progress.set_message(format!("{name}: cross-check with wrk"));
            let check = self.cross_check(server, wrk)?;
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
        Ok(())
    }

    /// The same endpoint (`GET /kv/user:1`) measured by wrk (Debian's, a lean C client) and
    /// by the lab **at the same time**, each at about half the first fixed rate on its own
    /// connections (the lab on as many as in its fixed-rate runs, so the check is of the
    /// figures it reports), in [`CROSS_CHECK_ROUNDS`] rounds: the VM's hiccups, which move a
    /// p99 2–3× between runs a minute apart, then fall on both tools alike. wrk has no
    /// constant-rate mode: each connection pauses [`WRK_PAUSE_MS`] after each answer (its Lua
    /// `delay()`), so `rate × pause` connections give about the rate. A short wrk run first
    /// finds the rate wrk reaches; each round's lab runs at the rate wrk reached in the round
    /// before.
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
            let spec = self.spec(server, rate, self.plan.warmup, self.plan.duration);
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
                steal: lab.cpu_times.as_ref().map(|window| {
                    let (server, load) = stolen(self.cpus, window);
                    steal(server, load)
                }),
            });
            // The next round's lab runs at the rate wrk reached in this one.
            rate = wrk_rate;
        }
        Ok(CrossCheck { url, connections, lab_connections: self.plan.connections, rounds })
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

    /// The highest rate whose p99 stays under the bound with no errors, by [`search`] from
    /// the first fixed rate.
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
        let once = |rate: f64| -> anyhow::Result<bool> {
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
        let floor = start / f64::from(self.plan.search_down.max(1));
        let good = search(start, floor, cap, self.plan.bisect_steps, once)?;
        s.rate = good;
        // When the generator itself fell behind at the lowest failing rate, the server's limit
        // may be above what was measured.
        let passed = |rate: f64| s.probes.iter().any(|p| p.pass && p.rate == rate);
        s.limited_by_load = s
            .probes
            .iter()
            .filter(|p| !p.pass && !passed(p.rate))
            .min_by(|a, b| a.rate.total_cmp(&b.rate))
            .is_some_and(|p| !p.kept_schedule);
        Ok(s)
    }
}

/// The saturation search over `probe` (true: the rate kept under the bound): doubles from
/// `start` up to `cap` until a rate fails, or halves down to `floor` until one passes, then
/// bisects `steps` times between the last good and the first bad rate. One VM hiccup must not
/// end it: a rate fails only when a second probe at it fails too. Returns the highest good
/// rate, if any.
fn search(
    start: f64,
    floor: f64,
    cap: f64,
    steps: u32,
    mut once: impl FnMut(f64) -> anyhow::Result<bool>,
) -> anyhow::Result<Option<f64>> {
    let mut probe = |rate: f64| -> anyhow::Result<bool> { Ok(once(rate)? || once(rate)?) };
    let (mut good, mut bad) = (None, None);
    let mut rate = start;
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
        // A runtime over the bound even at the floor has no rate to speak of, and each step
        // down costs two probes.
        while rate > floor.max(1.0) {
            rate /= 2.0;
            if probe(rate)? {
                good = Some(rate);
                break;
            }
            bad = Some(rate);
        }
    }
    if let (Some(mut lo), Some(mut hi)) = (good, bad) {
        for _ in 0..steps {
            let mid = ((lo + hi) / 2.0).round();
            if mid <= lo || mid >= hi {
                break;
            }
            if probe(mid)? { lo = mid } else { hi = mid }
        }
        good = Some(lo);
    }
    Ok(good)
}

/// One runtime's fixed-rate run, gathered slice by slice.
#[derive(Debug, Clone, Default)]
struct Gathered {
    load: LoadResult,
    /// Server CPU time over the slices, warm-ups included.
    cpu: Duration,
    /// Requests sent, warm-ups included.
    sent: f64,
    /// Recorded time.
    recorded: Duration,
    wall: Duration,
    /// Resident memory before the first slice.
    rss_before: Option<u64>,
    peak_rss: u64,
    /// The most the resident memory grew during one slice.
    grown: u64,
    /// Each slice's corrected p99, µs.
    round_p99_us: Vec<f64>,
    /// Steal on the server's CPUs over the slices' recordings.
    server_stolen: procfs::Stolen,
    /// The same on the generator's, when they are other CPUs.
    load_stolen: Option<procfs::Stolen>,
    /// Each slice's steal.
    round_steal: Vec<Steal>,
    /// Whether `/proc/stat` was unreadable for a slice.
    steal_unread: bool,
    /// The corrected latencies of the slices whose p99 the VM's steal did not bound.
    calm: Latencies,
    calm_slices: usize,
}

impl Gathered {
    /// Loads `server` with `spec` and adds what that measured, with its CPU and memory read
    /// around it.
    fn add(
        &mut self,
        server: &Server,
        spec: &LoadSpec,
        templates: &Arc<[RequestTemplate]>,
        cpus: &CpuPlan,
    ) -> anyhow::Result<()> {
        let pid = server.pid();
        let _ = procfs::reset_peak(pid);
        let before = procfs::sample(pid)?;
        let started = Instant::now();
        let result = load::run(spec, templates, &cpus.load)?;
        self.wall += started.elapsed();
        let after = procfs::sample(pid)?;
        let stolen = self.add_steal(cpus, result.cpu_times.as_ref());
        // Every request sent (warm-up included) cost CPU; charge it over all of them.
        self.sent += spec.rate * (spec.warmup + spec.duration).as_secs_f64();
        self.cpu += after.cpu.saturating_sub(before.cpu);
        self.recorded += spec.duration;
        self.rss_before.get_or_insert(before.rss);
        self.peak_rss = self.peak_rss.max(after.peak_rss);
        self.grown = self.grown.max(after.peak_rss.saturating_sub(before.rss));
        self.add_latencies(&result, stolen);
        Ok(())
    }

    /// Adds one slice's requests, and to the calm ones too when the VM's steal did not bound
    /// its p99.
    fn add_latencies(&mut self, result: &LoadResult, stolen: Option<Steal>) {
        self.round_p99_us.push(result.corrected.quantile(0.99).as_secs_f64() * 1e6);
        if stolen.is_some_and(|s| !s.bounds_p99()) {
            self.calm.merge(&result.corrected);
            self.calm_slices += 1;
        }
        let in_flight = self.load.max_in_flight.max(result.max_in_flight);
        self.load.merge(result);
        // The slices ran one after another: the most in flight is the larger, not the sum,
        // and there is no one recorded window (each slice's steal is counted apart).
        self.load.max_in_flight = in_flight;
        self.load.cpu_times = None;
    }

    /// Counts the steal on the server's and the generator's CPUs during one slice's
    /// recording, and returns it.
    fn add_steal(
        &mut self,
        cpus: &CpuPlan,
        window: Option<&(CpuTimes, CpuTimes)>,
    ) -> Option<Steal> {
        let Some(window) = window else {
            // One unreadable slice, and the run's figure would be a part passed off as whole.
            self.steal_unread = true;
            return None;
        };
        let (server, load) = stolen(cpus, window);
        self.server_stolen += server;
        if let Some(load) = load {
            *self.load_stolen.get_or_insert_default() += load;
        }
        let stolen = steal(server, load);
        self.round_steal.push(stolen);
        Some(stolen)
    }

    fn finish(self, workload: Workload, rate: f64, slack: Duration) -> Run {
        let load = &self.load;
        Run {
            workload,
            rate,
            achieved_rate: load.ok as f64 / self.recorded.as_secs_f64(),
            uncorrected_p99: load.uncorrected.summary().p99,
            latency: load.corrected.summary(),
            ok: load.ok,
            errors: load.errors,
            cpu_us_per_request: (self.sent > 0.0).then(|| self.cpu.as_secs_f64() * 1e6 / self.sent),
            peak_rss_mb: mb(self.peak_rss),
            rss_before_mb: mb(self.rss_before.unwrap_or_default()),
            max_in_flight: load.max_in_flight,
            memory_per_in_flight_kb: (load.max_in_flight > 0)
                .then(|| self.grown as f64 / 1024.0 / load.max_in_flight as f64),
            kept_schedule: load.kept_schedule(slack),
            dispatch_p99_us: load.dispatch_lateness.summary().p99,
            wall_s: self.wall.as_secs_f64(),
            round_p99_us: self.round_p99_us,
            steal: (!self.steal_unread).then(|| steal(self.server_stolen, self.load_stolen)),
            round_steal: self.round_steal,
            calm: (self.calm_slices > 0)
                .then(|| Calm { slices: self.calm_slices, latency: self.calm.summary() }),
        }
    }
}

/// The steal on the server's CPUs and, when they are others, the generator's, over `window`.
fn stolen(
    cpus: &CpuPlan,
    (from, to): &(CpuTimes, CpuTimes),
) -> (procfs::Stolen, Option<procfs::Stolen>) {
    let server = to.since(from, &cpus.server);
    // Not pinned, the generator runs on the server's CPUs: one figure says it all.
    let load = cpus.pinned().then(|| {
        let load: Vec<usize> = cpus.load.iter().flatten().copied().collect();
        to.since(from, &load)
    });
    (server, load)
}

/// Steal on the server's CPUs and, when separate, the generator's.
fn steal(server: procfs::Stolen, load: Option<procfs::Stolen>) -> Steal {
    Steal {
        server_pct: server.pct().unwrap_or(0.0),
        load_pct: load.map(|l| l.pct().unwrap_or(0.0)),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs [`search`] from 1000 rps against a server that keeps its p99 under the bound up to
    /// `limit`, except that the first probe at each rate in `hiccups` fails. Returns what the
    /// search found and every rate it probed.
    fn saturate(limit: f64, hiccups: Vec<f64>) -> (Option<f64>, Vec<f64>) {
        saturate_down_to(62.5, limit, hiccups)
    }

    /// The same, halving down to `floor` when 1000 fails.
    fn saturate_down_to(floor: f64, limit: f64, mut hiccups: Vec<f64>) -> (Option<f64>, Vec<f64>) {
        let mut tried = Vec::new();
        let found = search(1000.0, floor, 500_000.0, 4, |rate| {
            tried.push(rate);
            if let Some(i) = hiccups.iter().position(|&h| h == rate) {
                hiccups.remove(i);
                return Ok(false);
            }
            Ok(rate <= limit)
        })
        .unwrap();
        (found, tried)
    }

    #[test]
    fn the_search_doubles_then_bisects_to_the_limit() {
        let (found, tried) = saturate(6000.0, vec![]);
        assert_eq!(found, Some(6000.0));
        // 8000 and the bisection's failures are each probed twice.
        assert_eq!(
            tried,
            [1000., 2000., 4000., 8000., 8000., 6000., 7000., 7000., 6500., 6500., 6250., 6250.]
        );
    }

    #[test]
    fn one_hiccup_does_not_end_the_search() {
        let (found, tried) = saturate(6000.0, vec![4000.0]);
        assert_eq!(found, Some(6000.0), "{tried:?}");
        assert_eq!(tried.iter().filter(|&&r| r == 4000.0).count(), 2, "{tried:?}");
    }

    #[test]
    fn a_runtime_over_the_bound_everywhere_has_no_rate() {
        let (found, tried) = saturate(0.0, vec![]);
        assert_eq!(found, None);
        // Halved down to the floor, a sixteenth of the start, each rate twice.
        assert_eq!(tried, [1000., 1000., 500., 500., 250., 250., 125., 125., 62.5, 62.5]);
        // The quick plan's floor, a quarter: two steps down, then none.
        let (found, tried) = saturate_down_to(250.0, 0.0, vec![]);
        assert_eq!((found, tried), (None, vec![1000., 1000., 500., 500., 250., 250.]));
        // A rate that passes on the way down is bisected up from.
        let (found, _) = saturate_down_to(250.0, 700.0, vec![]);
        assert_eq!(found, Some(688.0));
    }

    /// `/proc/stat` with `steal` ticks on CPU 0 (the generator's) and CPU 1 (the server's).
    fn stat(at: Instant, steal: (u64, u64)) -> CpuTimes {
        let line = |cpu, steal| format!("cpu{cpu} 0 0 0 0 0 0 0 {steal} 0 0\n");
        CpuTimes::parse(&(line(0, steal.0) + &line(1, steal.1)), at, 100)
    }

    /// A slice whose 100 requests took `us` each.
    fn slice(us: u64) -> LoadResult {
        let mut result = LoadResult::default();
        for _ in 0..100 {
            result.corrected.record(Duration::from_micros(us));
        }
        result.ok = 100;
        result
    }

    #[test]
    fn the_calm_p99_merges_only_the_slices_the_vm_left_alone() {
        let cpus = CpuPlan { load: vec![vec![0]], server: vec![1] };
        let t0 = Instant::now();
        let mut gathered = Gathered::default();
        // 10 s slices, steal ticks (generator, server) at their start and end: none; 6 ticks,
        // 0.6 %, on each side (1.2 % together: not calm); 0.5 % on the server only.
        let slices = [((0, 0), (0, 0), 300), ((0, 0), (6, 6), 9000), ((10, 10), (10, 15), 400)];
        for (i, (from, to, us)) in slices.into_iter().enumerate() {
            let start = t0 + Duration::from_secs(20 * i as u64);
            let window = (stat(start, from), stat(start + Duration::from_secs(10), to));
            let stolen = gathered.add_steal(&cpus, Some(&window));
            gathered.add_latencies(&slice(us), stolen);
        }
        let run = gathered.finish(Workload::DbLookup, 100.0, Duration::from_millis(1));
        assert_eq!(run.round_p99_us.len(), 3);
        let calm = run.calm.expect("two calm slices");
        assert_eq!((calm.slices, calm.latency.count), (2, 200));
        assert!(calm.latency.p99 < 500.0, "the stolen slice is left out: {calm:?}");
        assert!(run.latency.p99 > 8000.0, "but counted in the run: {:?}", run.latency);
        // The run's steal: 110 ms of the server's 30 s, 60 ms of the generator's.
        let steal = run.steal.unwrap();
        assert!((steal.server_pct - 11.0 / 30.0).abs() < 1e-9, "{steal:?}");
        assert!((steal.load_pct.unwrap() - 0.2).abs() < 1e-9, "{steal:?}");
        assert_eq!(run.round_steal.len(), 3);
        assert!(run.round_steal[1].bounds_p99() && !run.round_steal[2].bounds_p99());
    }

    #[test]
    fn one_unreadable_slice_leaves_the_run_without_a_steal_figure() {
        let mut gathered = Gathered::default();
        let cpus = CpuPlan { load: Vec::new(), server: Vec::new() };
        let t0 = Instant::now();
        let window = (stat(t0, (0, 0)), stat(t0 + Duration::from_secs(1), (0, 0)));
        let calm = gathered.add_steal(&cpus, Some(&window));
        assert_eq!(calm, Some(Steal { server_pct: 0.0, load_pct: None }), "unpinned: one figure");
        gathered.add_latencies(&slice(300), calm);
        let unread = gathered.add_steal(&cpus, None);
        gathered.add_latencies(&slice(300), unread);
        let run = gathered.finish(Workload::DbLookup, 100.0, Duration::from_millis(1));
        assert_eq!(run.steal, None);
        // Only the slice known to be calm counts as calm.
        assert_eq!(run.calm.map(|c| c.slices), Some(1));
    }
}
