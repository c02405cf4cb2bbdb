//! Which CPUs the load generator and the server run on.
//!
//! On a machine with two or more CPUs the lab splits them: the load threads get the first
//! half (at least one), the server the rest, so neither steals the other's cycles and the
//! server's CPU time is its own. A server is pinned by spawning it from a thread pinned to its
//! CPUs (a child inherits its parent thread's affinity, threads it starts later included).

use std::process::{Child, Command};

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

/// Spawns `command` restricted to `cpus` (anywhere when empty).
fn spawn_on(cpus: &[usize], command: &mut Command) -> std::io::Result<Child> {
    if cpus.is_empty() {
        return command.spawn();
    }
    // From a scoped thread, so the caller's own affinity is never changed.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pin_current_thread(cpus)?;
                command.spawn()
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the spawning thread panicked")))
    })
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

    #[test]
    fn a_spawned_server_runs_on_the_server_cpus_and_the_caller_is_unchanged() {
        let cpus = available_cpus().unwrap();
        if cpus.len() < 2 {
            eprintln!("SKIPPED: one CPU, nothing to pin apart");
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
