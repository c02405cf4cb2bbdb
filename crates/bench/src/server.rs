//! A runtime's process while the lab measures it: spawned on the server CPUs and probed until
//! it answers, paused (SIGSTOP) while another runtime has its turn, and stopped (SIGTERM,
//! then SIGKILL) when dropped.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use crate::affinity::CpuPlan;
use crate::load::{RequestTemplate, request_once};
use crate::results::GcPauses;

/// A started runtime. Stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where its admin listener is (edgegate's), for `POST /reload`.
    pub admin: Option<SocketAddr>,
    /// Where its TLS listener is, when the lab measures TLS and the runtime serves it.
    pub tls: Option<SocketAddr>,
    /// From spawning the process to its first correct answer.
    pub started_in: Duration,
    /// The `redis-server` it counts in (`edgegate-rate-shared`), stopped after it.
    pub redis: Option<edgegate_testkit::redis::RedisServer>,
}

impl Server {
    /// The garbage-collection pauses since the last call, from the Node.js comparator
    /// (`GET /__lab/gc`, which `bench/node/server.mjs` serves from `perf_hooks`).
    pub fn gc_pauses(&self) -> anyhow::Result<GcPauses> {
        let template = RequestTemplate {
            method: http::Method::GET,
            uri: http::Uri::from_static("/__lab/gc"),
            headers: Vec::new(),
            body: bytes::Bytes::new(),
            expect: 200,
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (status, body) = runtime.block_on(request_once(self.addr, &template))?;
        anyhow::ensure!(status == 200, "GET /__lab/gc answered {status}");
        Ok(serde_json::from_slice(&body)?)
    }

    /// The process id, for `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process the lab runs for it on the generator's CPUs (its Redis), whose CPU time
    /// is the lab's, not another process's.
    pub fn helper(&self) -> Option<u32> {
        self.redis.as_ref().map(|r| r.pid())
    }

    /// Stops the process and waits for it.
    pub fn stop(mut self) {
        self.terminate();
    }

    /// Suspends the process (SIGSTOP), so that it takes no CPU while another runtime is
    /// measured. Connections made meanwhile wait in its listen queue.
    pub fn pause(&self) {
        self.signal(Signal::STOP);
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&self) {
        self.signal(Signal::CONT);
    }

    /// How the process ended, if it has (it is not reaped: its id stays its own), for an
    /// error that says why a runtime stopped answering.
    pub fn ended(&self) -> Option<String> {
        use rustix::process::{WaitId, WaitIdOptions, waitid};
        let pid = Pid::from_raw(self.child.id() as i32)?;
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        let status = waitid(WaitId::Pid(pid), options).ok()??;
        Some(match (status.exit_status(), status.terminating_signal()) {
            (_, Some(signal)) => format!("the process was killed by signal {signal}"),
            (Some(code), None) => format!("the process exited with status {code}"),
            (None, None) => "the process ended".into(),
        })
    }

    /// A process that has gone already is left alone: the next request to it fails.
    fn signal(&self, signal: Signal) {
        if let Some(pid) = Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        self.signal(Signal::TERM);
        // A paused process handles its SIGTERM only once it runs again.
        self.resume();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.terminate();
    }
}

impl Server {
    /// Spawns `command` on the server CPUs and waits until `probe` to `addr` gets a 200 (the
    /// time that takes is its start time), for at most `timeout`.
    pub fn start(
        command: &mut Command,
        addr: SocketAddr,
        cpus: &CpuPlan,
        probe: &RequestTemplate,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let started = Instant::now();
        let child = cpus.spawn_server(command)?;
        let mut server =
            Server { child, addr, admin: None, tls: None, started_in: Duration::ZERO, redis: None };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        loop {
            if let Ok((200, _)) = runtime.block_on(request_once(addr, probe)) {
                server.started_in = started.elapsed();
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait()? {
                anyhow::bail!("it exited ({status}) before answering");
            }
            if started.elapsed() > timeout {
                anyhow::bail!("it did not answer within {timeout:?}");
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_server_takes_no_cpu_until_it_resumes() {
        let child = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let server = Server {
            child,
            addr: "127.0.0.1:9".parse().unwrap(),
            admin: None,
            tls: None,
            started_in: Duration::ZERO,
            redis: None,
        };
        let cpu = || crate::procfs::sample(server.pid()).unwrap().cpu;
        std::thread::sleep(Duration::from_millis(100));
        server.pause();
        std::thread::sleep(Duration::from_millis(50));
        let paused = cpu();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(cpu(), paused, "a paused process ran");
        server.resume();
        std::thread::sleep(Duration::from_millis(300));
        assert!(cpu() > paused, "a resumed process did not run");
        server.pause();
        server.stop();
    }

    #[test]
    fn a_server_that_ended_says_how() {
        let server = |script: &str| Server {
            child: Command::new("sh").args(["-c", script]).spawn().unwrap(),
            addr: "127.0.0.1:9".parse().unwrap(),
            admin: None,
            tls: None,
            started_in: Duration::ZERO,
            redis: None,
        };
        let running = server("sleep 5");
        let exited = server("exit 3");
        let killed = server("kill -9 $$");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(running.ended(), None);
        assert_eq!(exited.ended().as_deref(), Some("the process exited with status 3"));
        assert_eq!(killed.ended().as_deref(), Some("the process was killed by signal 9"));
        // Not reaped: asking again gives the same answer.
        assert_eq!(killed.ended().as_deref(), Some("the process was killed by signal 9"));
    }
}
