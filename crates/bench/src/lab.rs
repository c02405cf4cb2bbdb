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
use std::time::Duration;

use anyhow::Context;

use indicatif::{ProgressBar, ProgressStyle};

use crate::affinity::CpuPlan;
use crate::catalogue::Runtime;
use crate::load::{self, LoadSpec, RequestTemplate};
use crate::procfs;
use crate::results::{Check, ColdStart, LabTransport, Meta, Results, RuntimeResult, Spread};
use crate::runtimes::{Environment, Prepared};
use crate::server::Server;
use crate::workload::{Expect, Fixtures, Workload};

pub mod capacity;
mod cross_check;
mod hot_swap;
mod plan;
mod saturation;
mod slices;

pub use plan::Plan;
use slices::Gathered;

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
    let mut results = Results { meta: meta(plan, cpus), runtimes: Vec::new() };
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
    lab.capacities(&mut results.runtimes, &servers);
    if !plan.capacity_only {
        lab.fixed_rates(&mut results.runtimes, &mut servers);
    }
    for (index, server) in servers {
        let result = &mut results.runtimes[index];
        server.resume();
        if !plan.capacity_only
            && let Err(e) = lab.searches(&server, result)
        {
            say(format!("{}: FAILED: {e:#}", result.runtime.name()));
            result.failed = Some(format!("{e:#}"));
        }
        server.stop();
        if result.runtime.logs_access()
            && let Err(e) = env.trim_access_log(result.runtime)
        {
            say(format!("{}: trimming its log: {e}", result.runtime.name()));
        }
    }
    progress.finish_and_clear();
    Ok(results)
}

/// The facts of this machine and `plan`, for the report's header.
fn meta(plan: &Plan, cpus: &CpuPlan) -> Meta {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let uname = rustix::system::uname();
    Meta {
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

struct Lab<'a, F: Fn(String)> {
    plan: &'a Plan,
    env: &'a Environment,
    cpus: &'a CpuPlan,
    fixtures: &'a Fixtures,
    progress: &'a ProgressBar,
    say: &'a F,
}

const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The start that loads json-transform's catalog, as the report names it.
pub const CATALOG_START: &str = "start with json-transform's catalog (100 000 products)";

/// The fewest requests due in one slice of a fixed-rate run: a run too short for its rate
/// gets fewer slices.
const MIN_SLICE: f64 = 10.0;

impl<F: Fn(String)> Lab<'_, F> {
    /// Starts `prepared` (timing its cold starts), reads its idle memory and checks its
    /// answer to every workload. Returns the server, running.
    fn start(&self, prepared: &Prepared) -> anyhow::Result<(RuntimeResult, Server)> {
        let runtime = prepared.runtime;
        let name = runtime.name();
        let mut result = RuntimeResult::new(runtime, Some(prepared.version.clone()));
        let probe = &self.fixtures.requests(Workload::StaticJson)[0].0;
        let server = self.cold_starts(prepared, probe, &mut result)?;
        for start in &result.cold_start {
            (self.say)(format!("{name}: {}: {:.1} ms", start.what, start.ms));
        }
        self.progress.inc(1);
        for &workload in &self.plan.workloads {
            if !runtime.serves(workload) {
                (self.say)(format!("{name}: {}: not served by this runtime", workload.name()));
                continue;
            }
            let check = check_answers(server.addr, &self.fixtures.requests(workload));
            for busy in check.as_ref().map_or(&[][..], Vec::as_slice) {
                (self.say)(format!("{name}: {}: asked again after {busy}", workload.name()));
            }
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

    /// The servers that are still running and answered `workload` correctly.
    fn answering<'s>(
        results: &[RuntimeResult],
        servers: &'s [(usize, Server)],
        workload: Workload,
    ) -> Vec<&'s (usize, Server)> {
        servers
            .iter()
            .filter(|(index, _)| {
                let r = &results[*index];
                r.failed.is_none() && r.checks.iter().any(|c| c.workload == workload && c.ok)
            })
            .collect()
    }

    /// Every capacity workload: each runtime that answered it correctly, in rounds, taking
    /// turns (see [`capacity`]).
    fn capacities(&self, results: &mut [RuntimeResult], servers: &[(usize, Server)]) {
        let settings = &self.plan.capacity_settings;
        let mut reaches = vec![capacity::Reach::plain()];
        if let Some(tls) = self.env.tls.as_ref().filter(|_| self.plan.tls) {
            match capacity::Reach::tls(&tls.ca) {
                Ok(tls) => reaches.extend(tls),
                Err(e) => (self.say)(format!("TLS capacity: FAILED: {e:#}")),
            }
        }
        for &workload in self.plan.capacity.iter().filter(|w| self.plan.workloads.contains(w)) {
            for reach in &reaches {
                let tls = reach.transport != LabTransport::Plain;
                let turns: Vec<_> = Self::answering(results, servers, workload)
                    .into_iter()
                    .filter(|(_, server)| !tls || server.tls.is_some())
                    .collect();
                let list: Vec<&Server> = turns.iter().map(|(_, server)| server).collect();
                let templates = self.templates(workload);
                let say = |m: String| self.progress.set_message(m);
                let what = if tls {
                    format!("{} ({})", workload.name(), reach.transport.name())
                } else {
                    workload.name().to_owned()
                };
                match capacity::measure(
                    &list,
                    workload,
                    reach,
                    &templates,
                    settings,
                    self.cpus,
                    &self.env.work,
                    &say,
                ) {
                    Ok(measured) => {
                        for (&&(index, _), capacity) in turns.iter().zip(measured) {
                            let r = &mut results[index];
                            let name = r.runtime.name();
                            match capacity {
                                Ok(capacity) => {
                                    (self.say)(format!(
                                        "{name} {what} capacity on {} connections: {}",
                                        capacity.connections,
                                        describe_capacity(&capacity)
                                    ));
                                    r.capacity.push(capacity);
                                }
                                // Marked failed, as a failed fixed-rate run is: the report
                                // says why its figures are missing.
                                Err(e) => {
                                    (self.say)(format!("{name} {what} capacity: FAILED: {e:#}"));
                                    r.failed = Some(format!("{what} capacity: {e:#}"));
                                }
                            }
                        }
                    }
                    Err(e) => (self.say)(format!("{what} capacity: FAILED: {e:#}")),
                }
                self.progress.inc((turns.len() * (1 + settings.rounds)) as u64);
            }
        }
    }

    /// Every workload at every fixed rate: each runtime that answered it correctly gets
    /// [`Plan::rounds`] slices of the run, taking turns with the others (the order rotates
    /// each round), and its slices are merged. A runtime that fails is marked so and dropped.
    fn fixed_rates(&self, results: &mut [RuntimeResult], servers: &mut Vec<(usize, Server)>) {
        for &workload in &self.plan.workloads {
            let templates = self.templates(workload);
            let reference = reference_capacity(results, workload);
            for rate in self.plan.rates_of(workload, reference.map(|r| r.0)) {
                let turns = Self::answering(results, servers, workload);
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
                        let slice =
                            self.slice(results[*index].runtime, server, into, &spec, &templates);
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
                    let mut run = gathered.finish(workload, rate, self.plan.slack_of(workload));
                    if let Some((capacity, of)) = reference.filter(|_| !workload.heavy()) {
                        run.of_capacity = Some((rate / capacity, of));
                    }
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

    /// One slice of a fixed-rate run into `into`; for Node.js, with the garbage-collection
    /// pauses V8 reported meanwhile (read before, to start afresh, and after).
    fn slice(
        &self,
        runtime: Runtime,
        server: &Server,
        into: &mut Gathered,
        spec: &LoadSpec,
        templates: &Arc<[RequestTemplate]>,
    ) -> anyhow::Result<()> {
        let gc = runtime == Runtime::Node;
        if gc {
            server.gc_pauses().context("reading Node.js's GC pauses")?;
        }
        into.add(server, spec, templates, self.cpus)?;
        if gc {
            into.add_gc(&server.gc_pauses().context("reading Node.js's GC pauses")?);
        }
        Ok(())
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

    /// Starts the runtime once to warm the page cache, then [`Plan::starts`] times (the start
    /// reported for every runtime, with its resident memory after each); edgegate also once
    /// with an empty module cache and once after a new version of one module, followed by its
    /// hot swaps to newer versions (`POST /reload`, [`hot_swap`]). These starts
    /// load no json-transform catalog, so that they time the runtime; the last start, with the
    /// catalog, is reported on its own (by a runtime that serves json-transform). Returns that
    /// server, still running.
    fn cold_starts(
        &self,
        prepared: &Prepared,
        probe: &RequestTemplate,
        result: &mut RuntimeResult,
    ) -> anyhow::Result<Server> {
        let start = || prepared.start(self.cpus, probe, START_TIMEOUT);
        let once = |what: &str, server: &Server| ColdStart {
            what: what.into(),
            ms: ms(server.started_in),
            rounds: Vec::new(),
        };
        prepared.write_catalog("")?;
        let edgegate = prepared.runtime.is_edgegate();
        if edgegate {
            self.env.clear_module_cache(prepared.runtime)?;
            let first = start()?;
            result.cold_start.push(once("first start, no module compiled yet", &first));
            first.stop();
        } else {
            start()?.stop();
        }
        let mut repeated = ColdStart {
            what: if edgegate { "start, modules cached" } else { "start" }.into(),
            ..ColdStart::default()
        };
        for _ in 0..self.plan.starts.max(1) {
            let server = start()?;
            repeated.rounds.push(ms(server.started_in));
            let rss = procfs::sample(server.pid()).ok().map(|s| mb(s.rss));
            result.idle_rss_rounds.extend(rss);
            server.stop();
        }
        repeated.ms = Spread::of(repeated.rounds.iter().copied()).map_or(0.0, |s| s.median);
        result.idle_rss_mb = Spread::of(result.idle_rss_rounds.iter().copied()).map(|s| s.median);
        result.cold_start.push(repeated);
        if edgegate {
            self.env.deploy_echo_json(prepared.runtime, 1).map_err(anyhow::Error::msg)?;
            let server = start()?;
            let what = "start after a new echo-json version (it compiles, the rest are cached)";
            result.cold_start.push(once(what, &server));
            result.cold_start.extend(self.hot_swaps(prepared, &server, probe)?);
            server.stop();
        }
        prepared.write_catalog(&self.fixtures.catalog)?;
        let server = start()?;
        if prepared.runtime.serves(Workload::JsonTransform) {
            result.cold_start.push(once(CATALOG_START, &server));
        }
        Ok(server)
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
}

/// The capacity `workload`'s fixed rates are shares of (the median of its rounds), if
/// measured: Node.js's for json-transform, whose question is what V8's collector does to the
/// tail at a given share of Node's own capacity; the slowest runtime's for the others.
/// Returns it with the runtime it is of.
fn reference_capacity(results: &[RuntimeResult], workload: Workload) -> Option<(f64, Runtime)> {
    let capacity = |r: &RuntimeResult| Some((r.capacity_of(workload)?.rps()?.median, r.runtime));
    let node = results.iter().find(|r| r.runtime == Runtime::Node).and_then(capacity);
    match node {
        Some(node) if workload == Workload::JsonTransform => Some(node),
        _ => results.iter().filter_map(capacity).min_by(|a, b| a.0.total_cmp(&b.0)),
    }
}

/// A capacity as one line: median and range of answers per second and CPU per answer, and
/// the requests that failed, if any did.
fn describe_capacity(c: &crate::results::Capacity) -> String {
    let (Some(rps), Some(cpu)) = (c.rps(), c.cpu_us()) else { return "no rounds".into() };
    let bound = if c.saturated() { "" } else { "≥ " };
    let wrk = c.wrk_rps().map_or(String::new(), |w| format!(", wrk {:.0}", w.median));
    let mut errors = crate::load::Errors::default();
    for round in &c.rounds {
        errors.add(&round.errors);
    }
    let failed = if errors.total() == 0 {
        String::new()
    } else {
        format!("; FAILED requests: {}{}", errors.describe(), busy_status(errors.last_status))
    };
    format!(
        "{bound}{:.0} req/s [{:.0}–{:.0}]{wrk}, {:.1} µs CPU/req [{:.1}–{:.1}]{failed}",
        rps.median, rps.min, rps.max, cpu.median, cpu.min, cpu.max
    )
}

/// What a status says when it is a server out of time or places rather than a wrong
/// answer: a busy machine can cause it, and a report should say so.
fn busy_status(status: Option<u16>) -> &'static str {
    match status {
        Some(504) => " (504: the server ran out of its deadline)",
        Some(503) => " (503: the server was out of CPU budget or places)",
        _ => "",
    }
}

/// Sends every request once and checks each answer; returns the busy refusals that were
/// asked again.
fn check_answers(
    addr: std::net::SocketAddr,
    requests: &[(RequestTemplate, Expect)],
) -> Result<Vec<String>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut retried = Vec::new();
    for (template, expect) in requests {
        let what = format!("{} {}", template.method, template.uri);
        // A server out of time or places (503, 504) on a busy machine is asked again, twice;
        // a wrong answer never is.
        let mut busy = Vec::new();
        loop {
            let (status, body) = runtime
                .block_on(load::request_once(addr, template))
                .map_err(|e| format!("{what}: {e:#}"))?;
            let checked = expect.check(status, &body);
            match checked {
                Err(e) if matches!(status, 503 | 504) && busy.len() < 2 => {
                    busy.push(format!("{e}{}", busy_status(Some(status))));
                }
                Err(e) if busy.is_empty() => return Err(format!("{what}: {e}")),
                Err(e) => return Err(format!("{what}: {e}, after {}", busy.join("; "))),
                Ok(()) => break,
            }
        }
        retried.extend(busy.into_iter().map(|b| format!("{what}: {b}")));
    }
    Ok(retried)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(super) fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
