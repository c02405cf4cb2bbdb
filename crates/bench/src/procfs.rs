//! A server process's CPU time and memory, read from `/proc/PID`; the time the hypervisor took
//! from each CPU (steal), read from `/proc/stat`; how idle CPUs wait, read from `/sys`.

use std::fs;
use std::time::{Duration, Instant};

/// One reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// User plus system CPU time of every thread, so far.
    pub cpu: Duration,
    /// Resident memory now, in bytes.
    pub rss: u64,
    /// The most resident memory since start or since [`reset_peak`], in bytes.
    pub peak_rss: u64,
}

/// Reads `/proc/PID/stat` and `/proc/PID/status`.
pub fn sample(pid: u32) -> std::io::Result<Sample> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse(&stat, &status, rustix::param::clock_ticks_per_second())
        .ok_or_else(|| std::io::Error::other(format!("unreadable /proc/{pid}/stat or status")))
}

/// Restarts the peak (`VmHWM`) at the current resident size (`clear_refs`, Linux ≥ 4.0).
pub fn reset_peak(pid: u32) -> std::io::Result<()> {
    fs::write(format!("/proc/{pid}/clear_refs"), "5")
}

/// Each CPU's steal so far, from `/proc/stat`, and when it was read. Steal is the time a
/// CPU was runnable but the hypervisor ran something else: on a VM, the pause no program can
/// avoid; on bare metal it stays 0.
///
/// Steal is compared with the wall time between two readings, not with the sum of the CPU's
/// other counters: on this VM those lose a third of the time when the CPU wakes from idle
/// thousands of times a second (a busy server's CPU counted 65–96 ticks a second, not 100).
///
/// Busy time (user, nice and system: what processes ran, not interrupts) is kept too, to tell
/// how much of a CPU ran something other than the lab's own processes ([`CpuTimes::busy_since`]).
/// On a CPU kept busy, as in a capacity run, those counters do add up.
///
/// Idle time (idle and iowait) is kept to tell whether a CPU was full
/// ([`CpuTimes::idle_since`]): the busy counters leave out interrupts, and a CPU full of a
/// load generator spends some of its time in the network's soft interrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTimes {
    at: Instant,
    /// Steal in clock ticks, indexed by CPU number.
    steal: Vec<Option<u64>>,
    /// User + nice + system in clock ticks, indexed by CPU number.
    busy: Vec<Option<u64>>,
    /// Idle + iowait in clock ticks, indexed by CPU number.
    idle: Vec<Option<u64>>,
    ticks_per_second: u64,
}

/// Steal over some CPUs and some time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stolen {
    /// Time the hypervisor took, summed over the CPUs.
    pub steal: Duration,
    /// Wall time times the CPUs counted.
    pub of: Duration,
}

impl std::ops::AddAssign for Stolen {
    fn add_assign(&mut self, other: Self) {
        self.steal += other.steal;
        self.of += other.of;
    }
}

impl Stolen {
    /// As a share of the time, in percent; `None` when no time was counted.
    pub fn pct(&self) -> Option<f64> {
        (!self.of.is_zero()).then(|| self.steal.as_secs_f64() * 100.0 / self.of.as_secs_f64())
    }
}

impl CpuTimes {
    /// Reads `/proc/stat`.
    pub fn read() -> std::io::Result<Self> {
        let stat = fs::read_to_string("/proc/stat")?;
        Ok(Self::parse(&stat, Instant::now(), rustix::param::clock_ticks_per_second()))
    }

    pub(crate) fn parse(stat: &str, at: Instant, ticks_per_second: u64) -> Self {
        let (mut steal, mut busy, mut idle) = (Vec::new(), Vec::new(), Vec::new());
        for line in stat.lines() {
            let mut fields = line.split_whitespace();
            let Some(cpu) = fields.next().and_then(|name| name.strip_prefix("cpu")) else {
                continue;
            };
            let Ok(cpu) = cpu.parse::<usize>() else { continue };
            // user nice system idle iowait irq softirq steal …
            let ticks: Vec<u64> = fields.take(8).map_while(|f| f.parse().ok()).collect();
            if ticks.len() < 8 {
                continue;
            }
            if steal.len() <= cpu {
                steal.resize(cpu + 1, None);
                busy.resize(cpu + 1, None);
                idle.resize(cpu + 1, None);
            }
            steal[cpu] = Some(ticks[7]);
            busy[cpu] = Some(ticks[0] + ticks[1] + ticks[2]);
            idle[cpu] = Some(ticks[3] + ticks[4]);
        }
        Self { at, steal, busy, idle, ticks_per_second: ticks_per_second.max(1) }
    }

    /// When this was read.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// How many CPUs it read.
    pub fn count(&self) -> usize {
        self.steal.len()
    }

    /// The time processes (any of them) ran on `cpus` from `earlier` to this reading (every
    /// CPU when `cpus` is empty).
    pub fn busy_since(&self, earlier: &Self, cpus: &[usize]) -> Duration {
        self.counted_since(earlier, cpus, |t| &t.busy)
    }

    /// The time `cpus` idled (waiting for input and output included) from `earlier` to this
    /// reading (every CPU when `cpus` is empty).
    pub fn idle_since(&self, earlier: &Self, cpus: &[usize]) -> Duration {
        self.counted_since(earlier, cpus, |t| &t.idle)
    }

    /// One per-CPU counter's growth over `cpus`, as time; a CPU missing from either reading
    /// is left out.
    fn counted_since(
        &self,
        earlier: &Self,
        cpus: &[usize],
        counter: impl Fn(&Self) -> &Vec<Option<u64>>,
    ) -> Duration {
        let (now, then) = (counter(self), counter(earlier));
        let ticks: u64 = self
            .cpus(cpus)
            .iter()
            .filter_map(|&cpu| {
                let now = now.get(cpu).copied().flatten()?;
                let then = then.get(cpu).copied().flatten()?;
                Some(now.saturating_sub(then))
            })
            .sum();
        Duration::from_secs_f64(ticks as f64 / self.ticks_per_second as f64)
    }

    /// `cpus`, or every CPU read when it is empty.
    fn cpus(&self, cpus: &[usize]) -> Vec<usize> {
        if cpus.is_empty() { (0..self.steal.len()).collect() } else { cpus.to_vec() }
    }

    /// The steal of `cpus` from `earlier` to this reading (every CPU when `cpus` is empty).
    /// A CPU missing from either reading is left out.
    pub fn since(&self, earlier: &Self, cpus: &[usize]) -> Stolen {
        let wall = self.at.saturating_duration_since(earlier.at);
        let mut sum = Stolen::default();
        for cpu in self.cpus(cpus) {
            let now = self.steal.get(cpu).copied().flatten();
            let then = earlier.steal.get(cpu).copied().flatten();
            if let (Some(now), Some(then)) = (now, then) {
                let ticks = now.saturating_sub(then);
                sum += Stolen {
                    steal: Duration::from_secs_f64(ticks as f64 / self.ticks_per_second as f64),
                    of: wall,
                };
            }
        }
        sum
    }
}

/// How this machine's idle CPUs wait for work, for the report header: the cpuidle driver and
/// governor, and with the `haltpoll` driver (a KVM guest's) its poll window. The window sets
/// what every wake-up costs: an idle vCPU polls that long before it halts, and a wake-up of a
/// halted one goes through the hypervisor. On this VM, with the kernel's default window of
/// 200 µs instead of its own 0, every runtime's p50 was about a quarter lower
/// (docs/benchmarks.md).
pub fn idle_state() -> String {
    idle_state_in(std::path::Path::new("/sys"))
}

fn idle_state_in(sys: &std::path::Path) -> String {
    let read = |path: &str| {
        fs::read_to_string(sys.join(path))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let Some(driver) = read("devices/system/cpu/cpuidle/current_driver") else {
        return "no cpuidle driver in /sys".into();
    };
    let governor = read("devices/system/cpu/cpuidle/current_governor")
        .or_else(|| read("devices/system/cpu/cpuidle/current_governor_ro"))
        .unwrap_or_else(|| "unknown".into());
    let mut out = format!("cpuidle driver {driver}, governor {governor}");
    if driver == "haltpoll" {
        match read("module/haltpoll/parameters/guest_halt_poll_ns") {
            Some(ns) if ns == "0" => out.push_str(
                ", halt-poll window 0 ns (an idle vCPU halts at once: every wake-up goes \
                 through the hypervisor)",
            ),
            Some(ns) => out.push_str(&format!(", halt-poll window {ns} ns")),
            None => out.push_str(", halt-poll window unreadable"),
        }
    }
    out
}

fn parse(stat: &str, status: &str, ticks_per_second: u64) -> Option<Sample> {
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the whole line (utime, stime) are the 12th and 13th after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = utime + stime;
    let cpu = Duration::from_secs(ticks / ticks_per_second)
        + Duration::from_nanos((ticks % ticks_per_second) * 1_000_000_000 / ticks_per_second);
    let kib = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line[name.len()..].trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
    };
    Some(Sample { cpu, rss: kib("VmRSS:")?, peak_rss: kib("VmHWM:")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_state_names_driver_governor_and_the_halt_poll_window() {
        let sys = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = sys.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        assert_eq!(idle_state_in(sys.path()), "no cpuidle driver in /sys");
        write("devices/system/cpu/cpuidle/current_driver", "intel_idle\n");
        write("devices/system/cpu/cpuidle/current_governor_ro", "menu\n");
        assert_eq!(idle_state_in(sys.path()), "cpuidle driver intel_idle, governor menu");
        write("devices/system/cpu/cpuidle/current_driver", "haltpoll\n");
        write("devices/system/cpu/cpuidle/current_governor", "haltpoll\n");
        assert_eq!(
            idle_state_in(sys.path()),
            "cpuidle driver haltpoll, governor haltpoll, halt-poll window unreadable"
        );
        write("module/haltpoll/parameters/guest_halt_poll_ns", "200000\n");
        assert_eq!(
            idle_state_in(sys.path()),
            "cpuidle driver haltpoll, governor haltpoll, halt-poll window 200000 ns"
        );
        write("module/haltpoll/parameters/guest_halt_poll_ns", "0\n");
        let halts = idle_state_in(sys.path());
        assert!(
            halts.ends_with(
                "halt-poll window 0 ns (an idle vCPU halts at once: every wake-up goes through \
                 the hypervisor)"
            ),
            "{halts}"
        );
    }

    #[test]
    fn parses_stat_and_status() {
        let stat = "4242 (node server (x)) S 1 2 3 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 7 0 \
                    123 456 789";
        let status = "Name:\tnode\nVmHWM:\t  51200 kB\nVmRSS:\t   40960 kB\n";
        let s = parse(stat, status, 100).unwrap();
        assert_eq!(s.cpu, Duration::from_secs(3));
        assert_eq!((s.rss, s.peak_rss), (40 << 20, 50 << 20));
        assert_eq!(parse("garbage", status, 100), None);
    }

    #[test]
    fn counts_each_cpus_steal_against_the_wall_time() {
        let t0 = Instant::now();
        let before = CpuTimes::parse(
            "cpu  30 0 10 200 0 0 0 6 0 0\n\
             cpu0 10 0 5 100 1 0 3 2 0 0\n\
             cpu1 20 0 5 100 0 0 0 4 0 0\n\
             intr 12345\nctxt 99\n",
            t0,
            100,
        );
        let after = CpuTimes::parse(
            "cpu  60 0 20 300 0 0 0 16 0 0\n\
             cpu0 20 0 10 150 4 0 9 2 7 0\n\
             cpu1 40 0 10 150 0 0 0 14 0 0\n",
            t0 + Duration::from_secs(2),
            100,
        );
        // cpu0: none stolen in 2 s (guest time, the 9th field, is not steal).
        let zero = after.since(&before, &[0]);
        assert_eq!(zero, Stolen { steal: Duration::ZERO, of: Duration::from_secs(2) });
        assert_eq!(zero.pct(), Some(0.0));
        // cpu1: 10 ticks, 100 ms, of 2 s: 5 %, whatever its other counters say.
        let one = after.since(&before, &[1]);
        assert_eq!(one.steal, Duration::from_millis(100));
        assert!((one.pct().unwrap() - 5.0).abs() < 1e-9, "{one:?}");
        // No CPUs named: all of them. A CPU that is not there counts nothing.
        let all = after.since(&before, &[]);
        assert_eq!((all.steal, all.of), (Duration::from_millis(100), Duration::from_secs(4)));
        assert_eq!(after.since(&before, &[7]), Stolen::default());
        assert_eq!(Stolen::default().pct(), None);
        // A line too short to hold steal is skipped, not misread.
        assert_eq!(CpuTimes::parse("cpu0 1 2 3\n", t0, 100).steal, Vec::<Option<u64>>::new());
        // Busy: user + nice + system. cpu0 ran 15 ticks, cpu1 25; interrupts do not count.
        assert_eq!(after.busy_since(&before, &[0]), Duration::from_millis(150));
        assert_eq!(after.busy_since(&before, &[1]), Duration::from_millis(250));
        assert_eq!(after.busy_since(&before, &[]), Duration::from_millis(400));
        // Idle: idle + iowait. cpu0 idled 53 ticks (50 + 3 waiting for I/O), cpu1 50.
        assert_eq!(after.idle_since(&before, &[0]), Duration::from_millis(530));
        assert_eq!(after.idle_since(&before, &[]), Duration::from_millis(1030));
        assert_eq!(after.idle_since(&before, &[7]), Duration::ZERO);
    }

    #[test]
    fn this_machine_reports_every_cpu() {
        let times = CpuTimes::read().unwrap();
        let cpus = std::thread::available_parallelism().unwrap().get();
        assert!(times.steal.iter().flatten().count() >= cpus, "{times:?}");
    }

    #[test]
    fn reads_a_real_process_and_sees_its_cpu_and_memory_grow() {
        let me = std::process::id();
        let before = sample(me).unwrap();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let after = sample(me).unwrap();
        assert!(after.cpu > before.cpu, "{before:?} {after:?}");
        assert!(after.peak_rss >= before.rss + (60 << 20), "{before:?} {after:?}");
        drop(block);
        reset_peak(me).unwrap();
        let reset = sample(me).unwrap();
        assert!(reset.peak_rss < after.peak_rss, "{after:?} {reset:?}");
    }
}
