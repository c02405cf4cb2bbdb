//! What a lab run does: the runtimes, the workloads, the rates and how long, for the quick
//! and the full plans.

use std::time::Duration;

use crate::runtimes::Runtime;
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

    pub(super) fn rates_of(&self, workload: Workload) -> &[f64] {
        if workload.heavy() { &self.heavy_rates } else { &self.rates }
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
        let runs: usize = self.workloads.iter().map(|&w| self.rates_of(w).len()).sum();
        let probes = self.saturate.iter().filter(|w| self.workloads.contains(w)).count()
            * (6 + self.bisect_steps as usize);
        (self.runtimes.len() * (1 + runs * self.rounds.max(1) + probes)) as u64
    }
}
