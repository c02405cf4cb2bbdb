//! The results of a lab run: what `results.json` holds, and what the report
//! ([`crate::report`]) and the charts ([`crate::charts`]) are made of.

use serde::{Deserialize, Serialize};

use crate::catalogue::Runtime;
use crate::latency::Summary;
use crate::load::Errors;
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
    /// The same after each repeated start, MiB.
    #[serde(default)]
    pub idle_rss_rounds: Vec<f64>,
    /// Whether each workload was answered correctly (a wrong answer is not measured).
    pub checks: Vec<Check>,
    /// Fixed-rate runs.
    pub runs: Vec<Run>,
    /// Saturation searches.
    pub saturation: Vec<Saturation>,
    /// Closed-loop capacity, per workload.
    #[serde(default)]
    pub capacity: Vec<Capacity>,
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
            idle_rss_rounds: Vec::new(),
            checks: Vec::new(),
            runs: Vec::new(),
            saturation: Vec::new(),
            capacity: Vec::new(),
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

    /// Its run of `workload` at `rate`.
    pub fn run(&self, workload: Workload, rate: f64) -> Option<&Run> {
        self.runs.iter().find(|r| r.workload == workload && r.rate == rate)
    }

    /// Its saturation search of `workload`.
    pub fn saturation_of(&self, workload: Workload) -> Option<&Saturation> {
        self.saturation.iter().find(|s| s.workload == workload)
    }

    /// Its capacity on `workload`, over plain HTTP.
    pub fn capacity_of(&self, workload: Workload) -> Option<&Capacity> {
        self.capacity_over(workload, LabTransport::Plain)
    }

    /// Its capacity on `workload` over `transport`.
    pub fn capacity_over(&self, workload: Workload, transport: LabTransport) -> Option<&Capacity> {
        self.capacity.iter().find(|c| c.workload == workload && c.transport == transport)
    }
}

/// One start-up time.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ColdStart {
    /// Which start.
    pub what: String,
    /// From spawning the process to the first correct answer, ms (the median when it was
    /// repeated).
    pub ms: f64,
    /// Each time, when it was repeated.
    #[serde(default)]
    pub rounds: Vec<f64>,
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
    /// That rate as a share of a runtime's capacity on the workload (the slowest runtime's;
    /// Node.js's for json-transform), and that runtime, when it was set so.
    #[serde(default)]
    pub of_capacity: Option<(f64, Runtime)>,
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
    /// Each slice's time of other processes on the lab's CPUs, in the order they ran (slices
    /// where it could not be read are left out).
    #[serde(default)]
    pub round_foreign: Vec<Foreign>,
    /// Each slice: whether it was calm (under 1 % steal and 1 % other processes, and every
    /// request answered).
    #[serde(default)]
    pub round_calm: Vec<bool>,
    /// The slices the VM left alone, merged (`None`: none was).
    #[serde(default)]
    pub calm: Option<Calm>,
    /// The garbage-collection pauses during the run's slices, warm-ups included, as the
    /// runtime reported them (Node.js only: `perf_hooks`).
    #[serde(default)]
    pub gc: Option<GcPauses>,
}

/// Garbage-collection pauses, as V8 reports them to Node.js's `perf_hooks` (`gc` entries).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GcPauses {
    /// How many.
    pub count: u64,
    /// How many were major (mark-compact) collections, which walk the whole heap.
    pub major: u64,
    /// Their time added up, ms.
    pub total_ms: f64,
    /// The longest, ms.
    pub max_ms: f64,
}

impl GcPauses {
    /// Adds `other`'s pauses to these.
    pub fn merge(&mut self, other: &GcPauses) {
        self.count += other.count;
        self.major += other.major;
        self.total_ms += other.total_ms;
        self.max_ms = self.max_ms.max(other.max_ms);
    }
}

/// The slices of a run whose p99 neither the VM's steal nor other processes bounded
/// ([`Steal::bounds_p99`], [`Foreign::bounds_p99`]), merged: the runtime's own latency, as far
/// as the machine let it be seen.
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

/// How the load generator reaches a server in a capacity measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabTransport {
    /// HTTP/1.1 on keep-alive connections.
    #[default]
    Plain,
    /// HTTP/1.1 over TLS on keep-alive connections: the records' cost, no handshakes.
    Tls,
    /// A TLS connection per request, each handshake resumed from a session ticket.
    TlsResumed,
    /// A TLS connection per request, each a full handshake (no resumption).
    TlsFull,
}

impl LabTransport {
    /// Every transport over TLS, in report order.
    pub const TLS: [Self; 3] = [Self::Tls, Self::TlsResumed, Self::TlsFull];

    /// As the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Tls => "TLS, keep-alive",
            Self::TlsResumed => "TLS, a resumed handshake per request",
            Self::TlsFull => "TLS, a full handshake per request",
        }
    }
}

/// How much a server answers with its CPU kept busy: a closed loop (each connection sends
/// its next request as soon as the last is answered) on as many connections as it takes, in
/// rounds, the runtimes taking turns.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Capacity {
    /// The workload.
    pub workload: Workload,
    /// How the generator reached the server.
    #[serde(default)]
    pub transport: LabTransport,
    /// The keep-alive connections the rounds ran on: the count where answers per second
    /// stopped growing.
    pub connections: usize,
    /// How the count was found: `(connections, answers per second)`, in order.
    pub ramp: Vec<(usize, f64)>,
    /// The rounds, in the order they ran.
    pub rounds: Vec<CapacityRound>,
}

/// One round of a capacity measurement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityRound {
    /// Correct answers per second.
    pub rps: f64,
    /// Correct answers.
    pub ok: u64,
    /// Failures.
    pub errors: Errors,
    /// The server's CPU time over the window, as a share of its CPUs' time, %.
    pub server_cpu_pct: f64,
    /// Server CPU time per correct answer, µs.
    pub cpu_us_per_request: f64,
    /// From each request's send to its answer, µs.
    pub p50_us: f64,
    /// The same, 99th percentile.
    pub p99_us: f64,
    /// The load generator's CPU time, as a share of its CPUs' time, %.
    pub load_cpu_pct: f64,
    /// How long the generator's CPUs idled, as a share of their time, % (`None`: not pinned
    /// apart from the server, or `/proc/stat` unreadable).
    #[serde(default)]
    pub load_idle_pct: Option<f64>,
    /// The time the hypervisor took (`None`: `/proc/stat` unreadable).
    pub steal: Option<Steal>,
    /// Time other processes ran on the lab's CPUs (`None`: unreadable).
    pub foreign: Option<Foreign>,
    /// wrk, on the same connections right after, when cross-checking.
    pub wrk: Option<WrkRound>,
}

/// wrk's closed loop on the same server, connections and time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WrkRound {
    /// Answers per second wrk counted.
    pub rps: f64,
    /// The server's CPU share meanwhile, %.
    pub server_cpu_pct: f64,
    /// Server CPU time per answer, µs.
    pub cpu_us_per_request: f64,
}

/// Time processes other than the lab's ran on its CPUs, in percent of those CPUs' time: the
/// server's CPUs less the server's own time, the generator's less the generator's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Foreign {
    /// On the server's CPUs (every CPU when nothing is pinned).
    pub server_pct: f64,
    /// On the generator's; `None` when it shares the server's.
    pub load_pct: Option<f64>,
}

impl Foreign {
    /// Whether other processes took as much time as bounds a p99 (see [`Steal::bounds_p99`]).
    pub fn bounds_p99(&self) -> bool {
        self.server_pct + self.load_pct.unwrap_or(0.0) >= Steal::P99_BOUND_PCT
    }

    /// As a table cell: server / load.
    pub fn describe(&self) -> String {
        match self.load_pct {
            Some(load) => format!("{:.1} / {load:.1}", self.server_pct),
            None => format!("{:.1}", self.server_pct),
        }
    }
}

/// A median and the range around it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// Of `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Self { median, min: v[0], max: v[n - 1] })
    }
}

impl CapacityRound {
    /// Below this share of its CPUs, a server was not the limit: its figure is a lower bound.
    pub const SATURATED_PCT: f64 = 95.0;

    /// Whether the server used its CPUs fully.
    pub fn saturated(&self) -> bool {
        self.server_cpu_pct >= Self::SATURATED_PCT
    }

    /// Whether the round counts: the VM and other processes left it alone (under 1 % each of
    /// steal and of foreign CPU, see [`Steal::P99_BOUND_PCT`]), and every request in it was
    /// answered.
    pub fn calm(&self) -> bool {
        self.steal.is_some_and(|s| !s.bounds_p99())
            && self.foreign.is_some_and(|f| !f.bounds_p99())
            && self.ok > 0
            && self.errors.total() == 0
    }

    /// The most of a round's requests that may be shed (503, 504) and still be excused.
    pub const EXCUSED_SHED_PCT: f64 = 10.0;

    /// Why this round's failed requests are excused, or `None` when they are not (or there
    /// were none). Only sheds are: answers of 503 or 504, a server out of places, CPU budget
    /// or time, which a machine whose CPUs the hypervisor or other processes took can cause;
    /// and only in a round the lab measured so (steal or foreign CPU over
    /// [`Steal::P99_BOUND_PCT`]), and for at most [`Self::EXCUSED_SHED_PCT`] of its requests.
    /// A wrong status, a broken connection or a timeout is never excused.
    pub fn excused(&self) -> Option<String> {
        let e = &self.errors;
        if e.shed == 0 || e.status > 0 || e.io > 0 || e.timeout > 0 {
            return None;
        }
        let steal = self.steal.filter(Steal::bounds_p99);
        let foreign = self.foreign.filter(Foreign::bounds_p99);
        if steal.is_none() && foreign.is_none() {
            return None;
        }
        let share = 100.0 * e.shed as f64 / (self.ok + e.shed) as f64;
        if share > Self::EXCUSED_SHED_PCT {
            return None;
        }
        let steal = steal.map_or("-".to_owned(), |s| s.describe());
        let foreign = foreign.map_or("-".to_owned(), |f| f.describe());
        Some(format!(
            "{} of {} requests ({share:.1} %) shed with 503 or 504 while the CPUs were taken: steal {steal} %, other processes {foreign} %",
            e.shed,
            self.ok + e.shed
        ))
    }

    /// What held the server under its CPU, when it was not saturated.
    pub fn bottleneck(&self) -> Option<String> {
        if self.saturated() {
            return None;
        }
        let foreign_load = self.foreign.and_then(|f| f.load_pct).unwrap_or(0.0);
        let steal_load = self.steal.and_then(|s| s.load_pct).unwrap_or(0.0);
        let load_busy = self.load_cpu_pct + foreign_load + steal_load;
        // Idle time says it best: the sum above leaves out interrupts, which a generator's
        // CPU full of network sends spends a few percent of its time in.
        let load_full = match self.load_idle_pct {
            Some(idle) => idle < 100.0 - Self::SATURATED_PCT,
            None => load_busy >= Self::SATURATED_PCT,
        };
        let steal = self.steal.map_or(0.0, |s| s.server_pct);
        let foreign = self.foreign.map_or(0.0, |f| f.server_pct);
        Some(if load_full {
            let idle = self.load_idle_pct.map_or(String::new(), |i| format!(", {i:.0} % idle"));
            format!(
                "the load generator's CPUs were full ({:.0} % generator, {foreign_load:.0} % other processes, {steal_load:.0} % steal{idle})",
                self.load_cpu_pct
            )
        } else if steal + foreign >= 5.0 {
            format!(
                "the server's CPUs were taken: {steal:.0} % steal, {foreign:.0} % other processes"
            )
        } else {
            format!(
                "the server waited with its CPUs {:.0} % busy and the generator's {load_busy:.0} %: not CPU-bound",
                self.server_cpu_pct
            )
        })
    }
}

impl Capacity {
    /// Answers per second over the rounds.
    pub fn rps(&self) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| r.rps))
    }

    /// Server CPU per answer over the rounds, µs.
    pub fn cpu_us(&self) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| r.cpu_us_per_request))
    }

    /// wrk's answers per second over the rounds it ran.
    pub fn wrk_rps(&self) -> Option<Spread> {
        Spread::of(self.rounds.iter().filter_map(|r| Some(r.wrk?.rps)))
    }

    /// Whether the server was saturated in most rounds; when not, its figure is a lower bound.
    pub fn saturated(&self) -> bool {
        let saturated = self.rounds.iter().filter(|r| r.saturated()).count();
        !self.rounds.is_empty() && saturated * 2 > self.rounds.len()
    }

    /// The rounds the VM and other processes left alone.
    pub fn calm(&self) -> impl Iterator<Item = &CapacityRound> {
        self.rounds.iter().filter(|r| r.calm())
    }

    /// The rounds where the lab and wrk agree within [`Capacity::WRK_TOLERANCE`].
    pub fn agreeing_with_wrk(&self) -> usize {
        self.rounds
            .iter()
            .filter(|r| r.wrk.is_some_and(|w| (r.rps - w.rps).abs() <= w.rps * Self::WRK_TOLERANCE))
            .count()
    }

    /// How far the lab's answers per second may be from wrk's.
    pub const WRK_TOLERANCE: f64 = 0.10;
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
    /// The runtimes that were installed (they ran, or failed trying).
    pub fn ran(&self) -> impl Iterator<Item = &RuntimeResult> {
        self.runtimes.iter().filter(|r| r.missing.is_none())
    }

    /// `runtime`'s result, if it measured anything.
    pub fn result(&self, runtime: Runtime) -> Option<&RuntimeResult> {
        self.measured().find(|r| r.runtime == runtime)
    }

    /// The workloads that were run at fixed rates by anyone, in report order.
    pub fn workloads(&self) -> Vec<Workload> {
        Workload::ALL
            .into_iter()
            .filter(|w| self.ran().any(|r| r.runs.iter().any(|run| run.workload == *w)))
            .collect()
    }

    /// The workloads whose capacity anyone measured, in report order.
    pub fn capacity_workloads(&self) -> Vec<Workload> {
        Workload::ALL
            .into_iter()
            .filter(|w| self.ran().any(|r| r.capacity_of(*w).is_some()))
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

    /// The runtimes that measured anything: fixed-rate runs or capacity.
    pub fn measured(&self) -> impl Iterator<Item = &RuntimeResult> {
        self.ran().filter(|r| !r.runs.is_empty() || !r.capacity.is_empty())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn round(wrk: (f64, f64), lab: (f64, f64)) -> CrossRound {
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

    pub(crate) fn check(rounds: Vec<CrossRound>) -> CrossCheck {
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
    fn a_generator_whose_cpus_never_idled_is_named_though_its_counters_sum_short() {
        let round = |server_cpu_pct, load_cpu_pct, load_idle_pct| CapacityRound {
            server_cpu_pct,
            load_cpu_pct,
            load_idle_pct,
            foreign: Some(Foreign { server_pct: 0.0, load_pct: Some(4.0) }),
            steal: Some(Steal { server_pct: 0.0, load_pct: Some(0.0) }),
            ..CapacityRound::default()
        };
        assert_eq!(round(97.0, 90.0, Some(0.0)).bottleneck(), None);
        // 94 % counted, the rest in interrupts: it never idled, so it was full.
        let full = round(23.0, 90.0, Some(0.4)).bottleneck().unwrap();
        assert!(full.contains("load generator's CPUs were full"), "{full}");
        assert!(full.contains("0 % idle"), "{full}");
        // Idle a tenth of the time, it had room: the server was not CPU-bound.
        let waited = round(23.0, 90.0, Some(10.0)).bottleneck().unwrap();
        assert!(waited.contains("not CPU-bound"), "{waited}");
        // Unknown idle time: the counters' sum decides.
        let summed = round(23.0, 92.0, None).bottleneck().unwrap();
        assert!(summed.contains("load generator's CPUs were full"), "{summed}");
        assert!(round(23.0, 90.0, None).bottleneck().unwrap().contains("not CPU-bound"));
    }

    #[test]
    fn only_a_few_sheds_on_taken_cpus_are_excused_never_a_wrong_status() {
        use crate::load::Errors;
        let round = |errors: Errors, steal_pct: f64, foreign_pct: f64| CapacityRound {
            ok: 1000,
            errors,
            steal: Some(Steal { server_pct: steal_pct, load_pct: Some(0.0) }),
            foreign: Some(Foreign { server_pct: foreign_pct, load_pct: Some(0.0) }),
            ..CapacityRound::default()
        };
        let shed = |n| {
            let mut e = Errors::default();
            e.unexpected(503, n);
            e
        };
        // A few 503s while the hypervisor took 3 % of the CPUs: said, not failed.
        let excused = round(shed(20), 3.0, 0.0).excused().expect("excused");
        assert!(excused.contains("20 of 1020 requests"), "{excused}");
        assert!(round(shed(20), 0.0, 2.0).excused().is_some(), "other processes' CPU too");
        // The same sheds on CPUs nobody took: the round is not calm only because of them.
        assert_eq!(round(shed(20), 0.2, 0.3).excused(), None);
        // More than the stated share.
        assert_eq!(round(shed(200), 3.0, 0.0).excused(), None);
        // Wrong statuses are never excused, even when the last answer was a 503 (the rule
        // before this one excused exactly this round).
        let mut wrong = shed(1);
        wrong.unexpected(500, 9);
        wrong.unexpected(503, 1);
        assert_eq!(wrong.last_status, Some(503));
        assert_eq!(round(wrong, 3.0, 0.0).excused(), None);
        let broken = Errors { io: 1, ..shed(5) };
        assert_eq!(round(broken, 3.0, 0.0).excused(), None);
        let late = Errors { timeout: 1, ..shed(5) };
        assert_eq!(round(late, 3.0, 0.0).excused(), None);
        assert_eq!(round(Errors::default(), 3.0, 0.0).excused(), None, "nothing to excuse");
    }
}
