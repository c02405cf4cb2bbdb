//! Which CPUs the load generator and the server run on.
//!
//! On a machine with two or more CPUs the lab splits them: the load threads get the first
//! half (at least one), the server the rest, so neither steals the other's cycles and the
//! server's CPU time is its own. A server is pinned in the child before it runs (threads it
//! starts later inherit the affinity).
//!
//! Everything the lab starts dies with it: a lab stopped by a signal (SIGTERM, Ctrl-C) would
//! otherwise leave its servers behind, paused (SIGSTOP) between their turns.

use std::process::{Child, Command};

use rustix::process::Signal;
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// The CPUs this process may run on.
pub fn available_cpus() -> std::io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&cpu| set.is_set(cpu)).collect())
}

/// Restricts the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    Ok(sched_setaffinity(None, &set)?)
}

/// Spawns `command` restricted to `cpus` (anywhere when empty), and killed (SIGKILL, which
/// a paused process takes too) when the thread that spawned it ends: the lab's, which ends
/// with the lab, however it ends.
fn spawn_on(cpus: &[usize], command: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt as _;
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    let pin = !cpus.is_empty();
    let lab = rustix::process::getpid();
    // SAFETY: only system calls run between fork and exec: no allocation, no lock.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // The lab may have ended before that line, and then no signal would ever come.
            if rustix::process::getppid() != Some(lab) {
                return Err(std::io::Error::other("the lab ended while starting this"));
            }
            if pin {
                sched_setaffinity(None, &set)?;
            }
            Ok(())
        });
    }
    command.spawn()
}

/// The split of CPUs between load and server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlan {
    /// One load thread per entry, pinned to it; empty when not pinning (one unpinned thread).
    pub load: Vec<Vec<usize>>,
    /// The server's CPUs; empty when not pinning.
    pub server: Vec<usize>,
}

impl CpuPlan {
    /// Splits `cpus` as the module doc says; with fewer than two, or when `pin` is false,
    /// nothing is pinned.
    pub fn new(cpus: &[usize], pin: bool) -> Self {
        if !pin || cpus.len() < 2 {
            return Self { load: Vec::new(), server: Vec::new() };
        }
        let load = cpus.len() / 2;
        Self {
            load: cpus[..load].iter().map(|&cpu| vec![cpu]).collect(),
            server: cpus[load..].to_vec(),
        }
    }

    /// Whether load and server are on separate CPUs.
    pub fn pinned(&self) -> bool {
        !self.server.is_empty()
    }

    /// Spawns `command` on the server's CPUs.
    pub fn spawn_server(&self, command: &mut Command) -> std::io::Result<Child> {
        spawn_on(&self.server, command)
    }

    /// Spawns `command` on the load generator's CPUs (an outside load tool).
    pub fn spawn_load(&self, command: &mut Command) -> std::io::Result<Child> {
        spawn_on(&self.load.concat(), command)
    }

    /// For the report: which CPUs do what.
    pub fn describe(&self) -> String {
        if self.pinned() {
            let load: Vec<String> = self.load.iter().map(|c| format!("{c:?}")).collect();
            format!("load generator on CPU {}, server on CPU {:?}", load.join(", "), self.server)
        } else {
            "not pinned (fewer than 2 CPUs, or --no-pin): load and server share the CPUs".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_split_between_load_and_server() {
        let two = CpuPlan::new(&[0, 1], true);
        assert_eq!((two.load, two.server), (vec![vec![0]], vec![1]));
        let four = CpuPlan::new(&[0, 1, 2, 3], true);
        assert_eq!((four.load, four.server), (vec![vec![0], vec![1]], vec![2, 3]));
        assert!(!CpuPlan::new(&[0], true).pinned());
        assert!(!CpuPlan::new(&[0, 1], false).pinned());
    }

    /// What a lab stopped by a signal does to its servers, with a thread standing in for
    /// the lab: a paused server dies with the thread that started it.
    #[test]
    fn a_server_dies_with_the_thread_that_started_it_even_paused() {
        use std::os::unix::process::ExitStatusExt as _;
        let plan = CpuPlan::new(&available_cpus().unwrap(), true);
        let mut child = std::thread::spawn(move || {
            let child = plan.spawn_server(Command::new("sleep").arg("60")).unwrap();
            let pid = rustix::process::Pid::from_child(&child);
            rustix::process::kill_process(pid, Signal::STOP).unwrap();
            child
        })
        .join()
        .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("the server outlived the thread that started it");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(9), "{status}");
    }

    #[test]
    fn a_spawned_server_runs_on_the_server_cpus_and_the_caller_is_unchanged() {
        let cpus = available_cpus().unwrap();
        if cpus.len() < 2 {
            let why = "one CPU, nothing to pin apart";
            edgegate_testkit::skipped("pinning the server apart", why, "EDGEGATE_REQUIRE_TWO_CPUS");
            return;
        }
        let plan = CpuPlan::new(&cpus, true);
        let before = available_cpus().unwrap();
        let out = plan
            .spawn_server(
                Command::new("grep")
                    .args(["Cpus_allowed_list", "/proc/self/status"])
                    .stdout(std::process::Stdio::piped()),
            )
            .unwrap()
            .wait_with_output()
            .unwrap();
        let line = String::from_utf8(out.stdout).unwrap();
        let listed = line.split_whitespace().nth(1).unwrap().to_string();
        let want: Vec<String> = plan.server.iter().map(usize::to_string).collect();
        assert!(
            listed == want.join(",") || listed == format!("{}-{}", want[0], want[want.len() - 1]),
            "{line}"
        );
        assert_eq!(available_cpus().unwrap(), before);
    }
}
