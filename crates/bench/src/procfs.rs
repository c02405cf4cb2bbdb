//! A server process's CPU time and memory, read from `/proc/PID`.

use std::fs;
use std::time::Duration;

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
