//! One runtime's fixed-rate run, gathered slice by slice while the runtimes take turns, and
//! the VM's steal over each slice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::mb;
use crate::affinity::CpuPlan;
use crate::latency::Latencies;
use crate::load::{self, LoadResult, LoadSpec, RequestTemplate, WindowMark};
use crate::procfs::{self, CpuTimes};
use crate::results::{Calm, Foreign, GcPauses, Run, Steal};
use crate::server::Server;
use crate::workload::Workload;

/// One runtime's fixed-rate run, gathered slice by slice.
#[derive(Debug, Clone, Default)]
pub(super) struct Gathered {
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
    /// Each slice's time of other processes on the lab's CPUs (`None`: unread).
    round_foreign: Vec<Option<Foreign>>,
    /// Each slice: whether the VM and other processes left it alone.
    round_calm: Vec<bool>,
    /// The corrected latencies of the calm slices: under 1 % steal and 1 % other processes.
    calm: Latencies,
    calm_slices: usize,
    /// The runtime's garbage-collection pauses over the slices, when it reports them.
    gc: Option<GcPauses>,
}

impl Gathered {
    /// Loads `server` with `spec` and adds what that measured, with its CPU and memory read
    /// around it.
    pub(super) fn add(
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
        let result =
            load::run(spec, templates, &cpus.load, &|| WindowMark::read(pid, server.helper()))?;
        self.wall += started.elapsed();
        let after = procfs::sample(pid)?;
        let calm = self.add_window(cpus, result.cpu_times.as_ref(), result.marks);
        // Every request sent (warm-up included) cost CPU; charge it over all of them.
        self.sent += spec.rate * (spec.warmup + spec.duration).as_secs_f64();
        self.cpu += after.cpu.saturating_sub(before.cpu);
        self.recorded += spec.duration;
        self.rss_before.get_or_insert(before.rss);
        self.peak_rss = self.peak_rss.max(after.peak_rss);
        self.grown = self.grown.max(after.peak_rss.saturating_sub(before.rss));
        self.add_latencies(&result, calm);
        Ok(())
    }

    /// Adds one slice's garbage-collection pauses.
    pub(super) fn add_gc(&mut self, pauses: &GcPauses) {
        self.gc.get_or_insert_default().merge(pauses);
    }

    /// Adds one slice's requests, and to the calm ones too when neither the VM's steal nor
    /// other processes bounded its p99 (`quiet`) and every request in it was answered: a
    /// slice with failures has no honest p99 (the failures are not in it), and one with no
    /// answer at all has none (an empty histogram would read as 0 µs).
    fn add_latencies(&mut self, result: &LoadResult, quiet: bool) {
        let calm = quiet && result.ok > 0 && result.errors.total() == 0;
        self.round_p99_us.push(result.corrected.quantile(0.99).as_secs_f64() * 1e6);
        self.round_calm.push(calm);
        if calm {
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

    /// Counts the steal and the other processes' time on the lab's CPUs during one slice's
    /// recording; returns whether the slice was calm (both known, each under 1 %).
    fn add_window(
        &mut self,
        cpus: &CpuPlan,
        window: Option<&(CpuTimes, CpuTimes)>,
        marks: Option<(WindowMark, WindowMark)>,
    ) -> bool {
        let stolen = self.add_steal(cpus, window);
        let others = window.zip(marks).map(|(w, m)| foreign(cpus, w, m));
        self.round_foreign.push(others);
        stolen.is_some_and(|s| !s.bounds_p99()) && others.is_some_and(|f| !f.bounds_p99())
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

    pub(super) fn finish(self, workload: Workload, rate: f64, slack: Duration) -> Run {
        let load = &self.load;
        Run {
            workload,
            rate,
            of_capacity: None,
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
            round_foreign: self.round_foreign.into_iter().flatten().collect(),
            round_calm: self.round_calm,
            calm: (self.calm_slices > 0)
                .then(|| Calm { slices: self.calm_slices, latency: self.calm.summary() }),
            gc: self.gc,
        }
    }
}

/// The steal on the server's CPUs and, when they are others, the generator's, over `window`.
pub(super) fn stolen(
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

/// Time other processes ran on the lab's CPUs over `window`: what ran on the server's CPUs
/// less the server's own time, on the generator's less the lab's (unpinned: all CPUs, less
/// both). A CPU that idles often undercounts its busy time on this VM ([`CpuTimes`]), so on
/// lightly loaded CPUs this is a lower bound; a busy foreign process keeps the CPU busy and
/// shows.
pub(super) fn foreign(
    cpus: &CpuPlan,
    (from, to): &(CpuTimes, CpuTimes),
    (start, end): (WindowMark, WindowMark),
) -> Foreign {
    let wall = to.at().saturating_duration_since(from.at()).as_secs_f64().max(1e-9);
    let server = end.server_cpu.saturating_sub(start.server_cpu);
    let lab = end.lab_cpu.saturating_sub(start.lab_cpu);
    let share = |cpus: &[usize], ours: Duration| {
        let n = if cpus.is_empty() { to.count() } else { cpus.len() }.max(1);
        let other = to.busy_since(from, cpus).saturating_sub(ours);
        other.as_secs_f64() * 100.0 / (wall * n as f64)
    };
    if cpus.pinned() {
        Foreign {
            server_pct: share(&cpus.server, server),
            load_pct: Some(share(&cpus.load.concat(), lab)),
        }
    } else {
        Foreign { server_pct: share(&[], server + lab), load_pct: None }
    }
}

/// Steal on the server's CPUs and, when separate, the generator's.
pub(super) fn steal(server: procfs::Stolen, load: Option<procfs::Stolen>) -> Steal {
    Steal {
        server_pct: server.pct().unwrap_or(0.0),
        load_pct: load.map(|l| l.pct().unwrap_or(0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let calm = gathered.add_window(&cpus, Some(&window), Some(Default::default()));
            gathered.add_latencies(&slice(us), calm);
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
        assert_eq!(run.round_calm, [true, false, true]);
    }

    #[test]
    fn a_slice_with_failures_or_no_answer_is_not_calm() {
        let mut gathered = Gathered::default();
        let mut failed = slice(300);
        failed.errors.timeout = 1;
        gathered.add_latencies(&failed, true);
        gathered.add_latencies(&LoadResult::default(), true);
        gathered.add_latencies(&slice(300), true);
        let run = gathered.finish(Workload::DbLookup, 100.0, Duration::from_millis(1));
        assert_eq!(run.round_calm, [false, false, true]);
        assert_eq!(run.round_p99_us[1], 0.0, "an empty slice reads 0 µs: never a calm one");
        assert_eq!(run.calm.unwrap().slices, 1);
    }

    #[test]
    fn other_processes_on_the_lab_cpus_make_a_slice_not_calm() {
        let cpus = CpuPlan { load: vec![vec![0]], server: vec![1] };
        let t0 = Instant::now();
        // 10 s on each CPU: the server's CPU ran 2 s of which the server was 1.9 s (1 % other
        // processes); the generator's ran 1 s, all of it the lab's.
        let busy = |at, (cpu0, cpu1)| {
            let text = format!("cpu0 {cpu0} 0 0 0 0 0 0 0 0 0\ncpu1 {cpu1} 0 0 0 0 0 0 0 0 0\n");
            CpuTimes::parse(&text, at, 100)
        };
        let window = (busy(t0, (0, 0)), busy(t0 + Duration::from_secs(10), (100, 200)));
        let mark = |server, lab| WindowMark {
            server_cpu: Duration::from_millis(server),
            lab_cpu: Duration::from_millis(lab),
        };
        let mut gathered = Gathered::default();
        let calm = gathered.add_window(&cpus, Some(&window), Some((mark(0, 0), mark(1900, 1000))));
        assert!(!calm);
        let others = gathered.round_foreign[0].unwrap();
        assert!(
            (others.server_pct - 1.0).abs() < 1e-9 && others.load_pct == Some(0.0),
            "{others:?}"
        );
        // The same with the server's own 2 s: calm.
        let calm = gathered.add_window(&cpus, Some(&window), Some((mark(0, 0), mark(2000, 1000))));
        assert!(calm);
    }

    #[test]
    fn one_unreadable_slice_leaves_the_run_without_a_steal_figure() {
        let mut gathered = Gathered::default();
        let cpus = CpuPlan { load: Vec::new(), server: Vec::new() };
        let t0 = Instant::now();
        let window = (stat(t0, (0, 0)), stat(t0 + Duration::from_secs(1), (0, 0)));
        let calm = gathered.add_window(&cpus, Some(&window), Some(Default::default()));
        assert!(calm);
        assert_eq!(
            gathered.round_steal,
            [Steal { server_pct: 0.0, load_pct: None }],
            "unpinned: one figure"
        );
        gathered.add_latencies(&slice(300), calm);
        let unread = gathered.add_window(&cpus, None, None);
        gathered.add_latencies(&slice(300), unread);
        let run = gathered.finish(Workload::DbLookup, 100.0, Duration::from_millis(1));
        assert_eq!(run.steal, None);
        // Only the slice known to be calm counts as calm.
        assert_eq!(run.calm.map(|c| c.slices), Some(1));
    }
}
