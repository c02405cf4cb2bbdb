//! What a lab run does: the runtimes, the workloads, the rates and how long, for the quick,
//! the full and the capacity plans.

use std::path::PathBuf;
use std::time::Duration;

use super::capacity::CapacitySettings;
use crate::catalogue::Runtime;
use crate::workload::Workload;

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
    pub wrk: Option<PathBuf>,
    /// Light workloads whose capacity is measured, before any fixed-rate run.
    pub capacity: Vec<Workload>,
    /// How.
    pub capacity_settings: CapacitySettings,
    /// The light workloads' fixed rates as shares of the slowest runtime's capacity on each
    /// (Node.js's on json-transform), when it was measured; [`Plan::rates`] otherwise. Empty:
    /// always [`Plan::rates`].
    pub load_fractions: Vec<f64>,
    /// Capacity only: no fixed-rate runs, no saturation search.
    pub capacity_only: bool,
    /// How many times each runtime is started and timed (after one start to warm the page
    /// cache): a verdict on start times needs five.
    pub starts: usize,
    /// Capacity over TLS too: keep-alive, a resumed handshake per request, a full one
    /// (the runtimes that serve TLS: edgegate, Node.js, native Rust).
    pub tls: bool,
}

/// The connection counts a capacity ramp tries.
const RAMP: [usize; 7] = [4, 8, 16, 32, 64, 128, 256];

/// The light workloads, whose capacity can be measured.
fn light() -> Vec<Workload> {
    Workload::ALL.into_iter().filter(|w| !w.heavy()).collect()
}

/// `wrk` when it is on PATH: every capacity figure is cross-checked with it.
fn wrk_on_path() -> Option<PathBuf> {
    let found = std::process::Command::new("wrk")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    found.then(|| PathBuf::from("wrk"))
}

impl Plan {
    /// The quick plan: db-lookup's capacity in three short rounds, one rate per workload
    /// (half the slowest runtime's db-lookup capacity for db-lookup); under two minutes for all
    /// four runtimes on two cores.
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
            saturate: Vec::new(),
            probe: (Duration::from_millis(200), Duration::from_millis(800)),
            bisect_steps: 1,
            search_down: 4,
            bound: Duration::from_millis(1),
            heavy_bound: Duration::from_millis(100),
            pin: true,
            command: String::new(),
            wrk: None,
            capacity: vec![Workload::DbLookup],
            capacity_settings: CapacitySettings {
                rounds: 3,
                warmup: Duration::from_millis(200),
                duration: Duration::from_millis(600),
                probe: (Duration::from_millis(100), Duration::from_millis(300)),
                connections: RAMP.to_vec(),
                growth: 0.05,
                wrk: None,
            },
            load_fractions: vec![0.5],
            capacity_only: false,
            starts: 1,
            tls: false,
        }
    }

    /// The capacity plan (`--capacity`): every light workload's capacity in five rounds of
    /// 2 s, each cross-checked with wrk when it is installed; nothing else. edgegate runs
    /// twice, at the lab's `warn` and as shipped (`edgegate-info`).
    pub fn capacity() -> Self {
        let quick = Self::quick();
        let mut runtimes = quick.runtimes.clone();
        runtimes.insert(1, Runtime::EdgegateInfo);
        Self {
            mode: "capacity".into(),
            runtimes,
            capacity: light(),
            capacity_settings: Self::full_capacity(),
            load_fractions: Vec::new(),
            capacity_only: true,
            starts: 5,
            ..quick
        }
    }

    fn full_capacity() -> CapacitySettings {
        CapacitySettings {
            rounds: 5,
            warmup: Duration::from_millis(500),
            duration: Duration::from_secs(2),
            probe: (Duration::from_millis(300), Duration::from_millis(700)),
            connections: RAMP.to_vec(),
            growth: 0.03,
            wrk: wrk_on_path(),
        }
    }

    /// The full plan: the capacity plan, then the light workloads at 25, 50, 75 and 90 % of
    /// the slowest runtime's capacity (5, 10 and 20 requests per second for the heavy
    /// ones), 10 s each in five 2 s slices (2 s of warm-up before the first, 0.4 s before
    /// each of the others), and a latency-bounded saturation search for every workload.
    pub fn full() -> Self {
        Self {
            mode: "full".into(),
            capacity: light(),
            capacity_settings: Self::full_capacity(),
            load_fractions: vec![0.25, 0.5, 0.75, 0.9],
            starts: 5,
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

    /// The fixed rates of `workload`, given the capacity they are shares of, if known.
    pub(super) fn rates_of(&self, workload: Workload, reference: Option<f64>) -> Vec<f64> {
        match reference {
            _ if workload.heavy() => self.heavy_rates.clone(),
            Some(capacity) if !self.load_fractions.is_empty() => {
                self.load_fractions.iter().map(|f| (f * capacity).round().max(1.0)).collect()
            }
            _ => self.rates.clone(),
        }
    }

    /// The most time the plan's loads take for `runtimes` runtimes, from its settings: the
    /// worst case of every ramp and search, wrk included, and 3 s per start. The quick plan
    /// must stay within two minutes.
    pub fn budget(&self, runtimes: usize) -> Duration {
        let n = runtimes as u32;
        let c = &self.capacity_settings;
        let workloads = self.capacity.iter().filter(|w| self.workloads.contains(w)).count() as u32;
        let ramp =
            (c.probe.0 + c.probe.1 + Duration::from_millis(100)) * c.connections.len() as u32;
        let round = c.warmup + c.duration + Duration::from_millis(100);
        let wrk = if c.wrk.is_some() {
            Duration::from_secs(c.duration.as_secs().max(1))
        } else {
            Duration::ZERO
        };
        let capacity = workloads * n * (ramp + c.rounds as u32 * (round + wrk));
        let mut fixed = Duration::ZERO;
        let mut search = Duration::ZERO;
        if !self.capacity_only {
            for &w in &self.workloads {
                let rates = if w.heavy() {
                    self.heavy_rates.len()
                } else if self.load_fractions.is_empty() {
                    self.rates.len()
                } else {
                    self.load_fractions.len()
                };
                fixed +=
                    n * rates as u32 * (self.warmup + self.duration + Duration::from_millis(200));
            }
            // Up from the start to the cap (or down to the floor), each rate twice, then the
            // bisection, each probe followed by a 200 ms pause.
            let probe = self.probe.0 + self.probe.1 + Duration::from_millis(200);
            let steps = 2 * (20 + self.bisect_steps);
            search = n
                * self.saturate.iter().filter(|w| self.workloads.contains(w)).count() as u32
                * steps
                * probe;
        }
        let starts = n * Duration::from_secs(3);
        capacity + fixed + search + starts
    }

    pub(super) fn bound_of(&self, workload: Workload) -> Duration {
        if workload.heavy() { self.heavy_bound } else { self.bound }
    }

    /// How late the generator may queue requests and still count as keeping its schedule: a
    /// fifth of the latency bound (200 µs for the light workloads). Sending 2 MB pictures, the
    /// generator is busier, and a millisecond does not matter against 100.
    pub(super) fn slack_of(&self, workload: Workload) -> Duration {
        self.bound_of(workload) / 5
    }

    /// About how many steps the progress bar counts.
    pub(super) fn steps(&self) -> u64 {
        let runs: usize = self.workloads.iter().map(|&w| self.rates_of(w, Some(1.0)).len()).sum();
        let probes = self.saturate.iter().filter(|w| self.workloads.contains(w)).count()
            * (6 + self.bisect_steps as usize);
        let transports = if self.tls { 4 } else { 1 };
        let capacity = self.capacity.iter().filter(|w| self.workloads.contains(w)).count()
            * (1 + self.capacity_settings.rounds)
            * transports;
        let fixed = if self.capacity_only { 0 } else { runs * self.rounds.max(1) + probes };
        (self.runtimes.len() * (1 + capacity + fixed)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_plan_fits_in_two_minutes_with_every_runtime() {
        let mut quick = Plan::quick();
        // Whatever is installed here, the budget counts wrk in.
        quick.capacity_settings.wrk = Some("wrk".into());
        let budget = quick.budget(Runtime::ALL.len());
        assert!(budget <= Duration::from_secs(120), "{budget:?}");
        // And it is a budget that can fail: the full plan's is far over it.
        assert!(Plan::full().budget(Runtime::ALL.len()) > Duration::from_secs(600));
    }

    #[test]
    fn the_capacity_plan_measures_edgegate_as_shipped_beside_the_lab_level() {
        let capacity = Plan::capacity().runtimes;
        assert_eq!(capacity[..2], [Runtime::Edgegate, Runtime::EdgegateInfo]);
        assert!(!Plan::quick().runtimes.contains(&Runtime::EdgegateInfo));
        assert!(!Plan::full().runtimes.contains(&Runtime::EdgegateInfo));
    }

    #[test]
    fn fixed_rates_follow_the_slowest_capacity_unless_given() {
        let full = Plan::full();
        assert_eq!(
            full.rates_of(Workload::DbLookup, Some(20_000.0)),
            [5000.0, 10_000.0, 15_000.0, 18_000.0]
        );
        assert_eq!(full.rates_of(Workload::DbLookup, None), [2000.0, 5000.0, 10_000.0]);
        assert_eq!(full.rates_of(Workload::ImageResize, Some(20_000.0)), [5.0, 10.0, 20.0]);
        let explicit = Plan { load_fractions: Vec::new(), ..Plan::full() };
        assert_eq!(
            explicit.rates_of(Workload::DbLookup, Some(20_000.0)),
            [2000.0, 5000.0, 10_000.0]
        );
    }
}
