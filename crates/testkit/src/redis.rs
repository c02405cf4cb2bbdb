//! A real Redis server for tests: Debian's `redis-server`, on a free loopback port, with no
//! persistence, killed when dropped.
//!
//! When `redis-server` is not installed, [`RedisServer::start`] returns `None` after printing
//! a loud notice, and the calling test must return early; with `EDGEGATE_REQUIRE_REDIS=1` (as
//! `.ci/run` sets) it panics instead, so CI can never pass without running the Redis tests.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// Starts a server on a free port; `None` (announced on stderr) when `redis-server` is
    /// not installed and Redis is not required. `test` names the caller in the notice.
    pub fn start(test: &str) -> Option<Self> {
        let port = crate::free_port();
        match Self::start_on(port) {
            Ok(server) => Some(server),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let why = format!(
                    "redis-server is not installed ({e}); Debian: apt-get install redis-server"
                );
                crate::skipped(test, &why, "EDGEGATE_REQUIRE_REDIS");
                None
            }
            Err(e) => panic!("{test}: cannot start redis-server: {e}"),
        }
    }

    /// Starts a server on `port` (for a restart on the same address) and waits until it
    /// answers `PING`.
    pub fn start_on(port: u16) -> std::io::Result<Self> {
        Self::start_with(port, Command::spawn)
    }

    /// [`RedisServer::start_on`], with `spawn` starting the process (the lab pins it to CPUs).
    pub fn start_with(
        port: u16,
        spawn: impl FnOnce(&mut Command) -> std::io::Result<Child>,
    ) -> std::io::Result<Self> {
        let child = spawn(
            Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no", "--protected-mode", "yes"])
                .stdout(Stdio::null())
                .stderr(Stdio::inherit()),
        )?;
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if server.ping() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(std::io::Error::other(format!("redis-server on port {port} did not answer PING")))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut answer = [0; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut answer).is_ok()
            && &answer == b"+PONG\r\n"
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A "Redis" on loopback that accepts connections, reads nothing and never answers: what a hung
/// server looks like to a client. Its thread holds every connection until the process exits.
/// Returns the port.
pub fn silent_server() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free port");
    let port = listener.local_addr().expect("a bound address").port();
    std::thread::spawn(move || {
        // Collecting never ends while the listener accepts: every connection stays open.
        let _held: Vec<TcpStream> = listener.incoming().map_while(Result::ok).collect();
    });
    port
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
