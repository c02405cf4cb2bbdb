//! A real OCI registry for tests: Debian's `docker-registry` (CNCF distribution), on a free
//! loopback port, storing in a temporary directory, killed when dropped.
//!
//! When it is not installed, [`Registry::start`] returns `None` after printing a loud notice,
//! and the calling test must return early; with `EDGEGATE_REQUIRE_REGISTRY=1` (as `.ci/run`
//! sets) it panics instead.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `docker-registry`.
#[derive(Debug)]
pub struct Registry {
    child: Child,
    /// Where it listens.
    addr: SocketAddr,
    storage: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry on a free port; `None` (announced on stderr) when `docker-registry`
    /// is not installed and not required. `test` names the caller in the notice.
    pub fn start(test: &str) -> Option<Self> {
        Self::start_as(test, Ipv4Addr::LOCALHOST.into(), None)
    }

    /// [`Registry::start`] on address `ip` instead of loopback.
    pub fn start_on(test: &str, ip: IpAddr) -> Option<Self> {
        Self::start_as(test, ip, None)
    }

    /// [`Registry::start`], with every request needing `user`'s `password` (HTTP basic, as
    /// `htpasswd` authentication checks it).
    pub fn start_with_auth(test: &str, user: &str, password: &str) -> Option<Self> {
        Self::start_as(test, Ipv4Addr::LOCALHOST.into(), Some((user, password)))
    }

    fn start_as(test: &str, ip: IpAddr, auth: Option<(&str, &str)>) -> Option<Self> {
        let addr = SocketAddr::new(ip, crate::free_port());
        let storage = tempfile::tempdir().expect("a storage directory");
        let config = storage.path().join("config.yml");
        let data = storage.path().join("data");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {addr}\n",
            data.display()
        );
        if let Some((user, password)) = auth {
            let file = storage.path().join("htpasswd");
            let hash = bcrypt::hash(password, 4).expect("a bcrypt hash");
            std::fs::write(&file, format!("{user}:{hash}\n")).expect("writing htpasswd");
            let realm = "edgegate-tests";
            text +=
                &format!("auth:\n  htpasswd:\n    realm: {realm}\n    path: {}\n", file.display());
        }
        std::fs::write(&config, text).expect("writing the registry's configuration");
        let child = match Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
        {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let why = format!(
                    "docker-registry is not installed ({e}); Debian: apt-get install docker-registry"
                );
                crate::skipped(test, &why, "EDGEGATE_REQUIRE_REGISTRY");
                return None;
            }
            Err(e) => panic!("{test}: cannot start docker-registry: {e}"),
        };
        let registry = Self { child, addr, storage };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !registry.answers() {
            assert!(Instant::now() < deadline, "{test}: docker-registry did not answer /v2/");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(registry)
    }

    /// `IP:PORT` (`127.0.0.1:PORT` unless started elsewhere).
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Where it keeps its blobs: `…/docker/registry/v2/blobs/sha256/XX/HEX/data`.
    pub fn blob(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Stops it (the port is closed until something else takes it): a registry down.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its storage directory.
    pub fn storage(&self) -> &Path {
        self.storage.path()
    }

    /// `GET path` with `accept`: the status line's code and the body.
    pub fn get(&self, path: &str, accept: &str) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: {}\r\naccept: {accept}\r\nconnection: close\r\n\r\n",
            self.host()
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("read");
        let split = answer.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
        let head = String::from_utf8_lossy(&answer[..split]).to_string();
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, answer[split..].to_vec())
    }

    fn answers(&self) -> bool {
        // 401 from one that wants credentials.
        TcpStream::connect(self.addr).is_ok() && matches!(self.get("/v2/", "*/*").0, 200 | 401)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
