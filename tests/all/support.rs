//! Running the real `edgegate` binary on loopback, and a small HTTP/1.1 client to talk to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the gateway may take to start (it may compile modules).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// One shared module cache for every test process, so each module compiles once per run.
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("module-cache")
}

/// A running `edgegate serve`. Killed on drop.
pub struct Gateway {
    child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    /// The TLS listener, with `[server.tls]`.
    pub tls: Option<SocketAddr>,
    stderr: Option<JoinHandle<String>>,
    stdout: mpsc::Receiver<String>,
    /// Where `start` wrote the configuration.
    dir: tempfile::TempDir,
}

/// The value of the counter or gauge `series` on `gw`'s `/metrics` (its name and labels,
/// as exposed), 0 when absent.
pub fn counter(gw: &Gateway, series: &str) -> u64 {
    let line = format!("{series} ");
    get(gw.admin, "/metrics")
        .text()
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// The first line of `gw`'s `/metrics` that starts with `line_start`.
pub fn metric_line(gw: &Gateway, line_start: &str) -> Option<String> {
    let text = get(gw.admin, "/metrics").text();
    text.lines().find(|l| l.starts_with(line_start)).map(str::to_owned)
}

/// The sum of every series of the metric `name` on `gw`'s `/metrics`.
pub fn metric_total(gw: &Gateway, name: &str) -> u64 {
    get(gw.admin, "/metrics")
        .text()
        .lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits for a state: polls `holds` until it is true, and fails naming `what` after 30 s.
pub fn wait_until(what: &str, mut holds: impl FnMut() -> bool) {
    let started = Instant::now();
    while !holds() {
        assert!(started.elapsed() < Duration::from_secs(30), "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Writes `config` to a fresh directory; returns the directory and the file.
pub fn write_config(config: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edgegate.toml");
    std::fs::write(&path, config).unwrap();
    (dir, path)
}

/// A config's `[runtime]` table pointing at the shared test cache.
pub fn runtime_section() -> String {
    format!("[runtime]\ncache_dir = {:?}\n", cache_dir().display().to_string())
}

/// A config that serves the hostile test guest under `/h/`, with room to spin (10 s of CPU and
/// deadline, a million host calls). `server` goes into `[server]`; `limits` adds worker limits.
pub fn spinning_hostile(server: &str, limits: &str) -> String {
    spinning_hostile_with(server, limits, "")
}

/// [`spinning_hostile`] with more lines in the worker's table (`fetch = […]`, `kv = […]`).
pub fn spinning_hostile_with(server: &str, limits: &str, worker: &str) -> String {
    format!(
        r#"
        [server]
        {server}

        {runtime}
        [workers.hostile]
        module = "{hostile}"
        limits = {{ cpu = "10s", deadline = "10s", hostcalls = 1000000 {limits} }}
        {worker}

        [[routes]]
        prefix = "/h"
        worker = "hostile"
        "#,
        runtime = runtime_section(),
        hostile = edgegate_guests::HOSTILE,
    )
}

impl Gateway {
    /// `edgegate serve --config <config>` on free ports.
    pub fn start(config: &str) -> Self {
        Self::start_with(config, &[], &[])
    }

    /// [`Gateway::start`] with more arguments and environment variables.
    pub fn start_with(config: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let (dir, path) = write_config(config);
        let mut all = vec!["--config", path.to_str().unwrap()];
        all.extend_from_slice(args);
        Self::spawn(&all, env, dir, None)
    }

    /// [`Gateway::start`] in a process whose open-file limit (`RLIMIT_NOFILE`) is `soft`
    /// under `hard` from the start.
    pub fn start_with_open_files(config: &str, soft: u64, hard: u64) -> Self {
        let (dir, path) = write_config(config);
        Self::spawn(&["--config", path.to_str().unwrap()], &[], dir, Some((soft, hard)))
    }

    /// `edgegate serve --config <path>` with more environment variables, for a configuration
    /// the test keeps (and may serve again after a restart).
    pub fn start_at(path: &std::path::Path, env: &[(&str, &str)]) -> Self {
        Self::start_at_with(path, &[], env)
    }

    /// [`Gateway::start_at`] with more arguments.
    pub fn start_at_with(path: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let unused = tempfile::tempdir().unwrap();
        let mut all = vec!["--config", path.to_str().unwrap()];
        all.extend_from_slice(args);
        Self::spawn(&all, env, unused, None)
    }

    /// Lowers the running gateway's open-file limit, soft and hard, to `limit`: what start-up
    /// checked no longer holds.
    pub fn limit_open_files(&self, limit: u64) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).unwrap();
        let limit = rustix::process::Rlimit { current: Some(limit), maximum: Some(limit) };
        rustix::process::prlimit(Some(pid), rustix::process::Resource::Nofile, limit).unwrap();
    }

    /// `edgegate serve` with no configuration: the bundled demo.
    pub fn demo(env: &[(&str, &str)]) -> Self {
        Self::demo_with(&[], env)
    }

    /// [`Gateway::demo`] with more arguments.
    pub fn demo_with(args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cache_home = cache_dir().join("xdg");
        let mut env = env.to_vec();
        env.push(("XDG_CACHE_HOME", cache_home.to_str().unwrap()));
        Self::spawn(args, &env, dir, None)
    }

    /// [`Gateway::start_with`], its stderr a pipe nobody reads until the returned sender sends
    /// (or is dropped): a log reader that stalls.
    pub fn start_with_stalled_stderr(
        config: &str,
        env: &[(&str, &str)],
    ) -> (Self, mpsc::Sender<()>) {
        let (dir, path) = write_config(config);
        let (release, stalled) = mpsc::channel();
        let gateway =
            Self::spawn_as(&["--config", path.to_str().unwrap()], env, dir, None, Some(stalled));
        (gateway, release)
    }

    fn spawn(
        args: &[&str],
        env: &[(&str, &str)],
        dir: tempfile::TempDir,
        open_files: Option<(u64, u64)>,
    ) -> Self {
        Self::spawn_as(args, env, dir, open_files, None)
    }

    fn spawn_as(
        args: &[&str],
        env: &[(&str, &str)],
        dir: tempfile::TempDir,
        open_files: Option<(u64, u64)>,
        stalled: Option<mpsc::Receiver<()>>,
    ) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_edgegate"));
        if let Some((soft, hard)) = open_files {
            use std::os::unix::process::CommandExt;
            let limit = rustix::process::Rlimit { current: Some(soft), maximum: Some(hard) };
            // SAFETY: setrlimit is async-signal-safe and touches no memory of this process.
            unsafe {
                command.pre_exec(move || {
                    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                        .map_err(std::io::Error::from)
                });
            }
        }
        let mut child = command
            .arg("serve")
            .args(args)
            .args(if args.contains(&"--listen") { &[][..] } else { &["--listen", "127.0.0.1:0"] })
            .args(if args.contains(&"--admin") { &[][..] } else { &["--admin", "127.0.0.1:0"] })
            .env_remove("EDGEGATE_LOG")
            .env_remove("EDGEGATE_CONFIG")
            .env_remove("EDGEGATE_DEMO_SECRET")
            .env_remove("EDGEGATE_LOG_FORMAT")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_TRACES_SAMPLER_ARG")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning edgegate");
        let stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            if let Some(stalled) = stalled {
                let _ = stalled.recv();
            }
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            text
        });
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut gateway = Self {
            child,
            addr: unbound(),
            admin: unbound(),
            tls: None,
            stderr: Some(stderr),
            stdout: rx,
            dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while gateway.addr == unbound() || gateway.admin == unbound() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = gateway.stdout.recv_timeout(left) else {
                let (status, stderr) = gateway.stop();
                panic!("edgegate did not report its addresses ({status}); stderr:\n{stderr}");
            };
            if let Some(addr) = line.strip_prefix("listening on http://") {
                gateway.addr = addr.parse().unwrap();
            } else if let Some(addr) = line.strip_prefix("admin on http://") {
                gateway.admin = addr.parse().unwrap();
            } else if let Some(addr) = line.strip_prefix("tls on https://") {
                gateway.tls = Some(addr.parse().unwrap());
            }
        }
        gateway
    }

    /// The next line `serve` prints after its addresses, if one comes within `timeout`.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.stdout.recv_timeout(timeout).ok()
    }

    /// The demo's tokens, by audience, as `serve` prints them after its addresses.
    pub fn demo_tokens(&self) -> Vec<(String, String)> {
        let mut tokens = Vec::new();
        while tokens.len() < 2 {
            let line = self.stdout.recv_timeout(Duration::from_secs(30)).expect("the demo tokens");
            if let Some(rest) = line.strip_prefix("demo token for ")
                && let Some((audience, token)) = rest.split_once(": ")
            {
                tokens.push((audience.to_owned(), token.to_owned()));
            }
        }
        tokens
    }

    /// Replaces the configuration file `start` wrote with `config` (whole, by rename), for
    /// the next reload.
    pub fn rewrite_config(&self, config: &str) {
        let tmp = self.dir.path().join("edgegate.toml.tmp");
        std::fs::write(&tmp, config).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("edgegate.toml")).unwrap();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal to the process.
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// Waits up to `timeout` for the process to exit by itself.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Stops the process (SIGTERM, then SIGKILL after 30 s) and returns how it exited and
    /// everything it wrote to stderr.
    pub fn stop(&mut self) -> (ExitStatus, String) {
        if self.child.try_wait().unwrap().is_none() {
            self.signal(rustix::process::Signal::TERM);
        }
        let status = match self.wait(Duration::from_secs(30)) {
            Some(status) => status,
            None => {
                let _ = self.child.kill();
                self.child.wait().unwrap()
            }
        };
        let stderr = self.stderr.take().map(|h| h.join().unwrap()).unwrap_or_default();
        (status, stderr)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unbound() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

/// Says loudly that `what` is not tested, and `why`, and lists it for `./scripts/test`'s end;
/// fails instead when the environment variable `required` is 1 (as `.ci/run` sets for each).
pub use edgegate_testkit::skipped;

/// `POST /reload` on `gw`'s admin listener, with `token` as its bearer token if given.
pub fn reload(gw: &Gateway, token: Option<&str>) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> =
        auth.as_deref().map(|a| vec![("Authorization", a)]).unwrap_or_default();
    http(gw.admin, "POST", "/reload", &headers, b"")
}

/// A response read off the wire.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("body is not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body))
        })
    }

    /// The `error` code of a gateway error body.
    pub fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str("Host: localhost\r\n");
    }
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-length")) {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    read_reply(&mut stream)
}

/// Sends `request` as written on a fresh connection and reads the one reply (the request
/// should close the connection: `Connection: close`, or HTTP/1.0).
pub fn raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(request).unwrap();
    read_reply(&mut stream)
}

pub fn get(addr: SocketAddr, path: &str) -> Reply {
    http(addr, "GET", path, &[], b"")
}

pub fn post(addr: SocketAddr, path: &str, body: &[u8]) -> Reply {
    http(addr, "POST", path, &[], body)
}

/// Reads one response from a connection the server closes after it.
pub fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete response head");
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if let Some(len) = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-length")) {
        body.truncate(len.1.parse().unwrap());
    }
    Reply { status, headers, body }
}

/// A request an [`Origin`] received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub head: String,
}

impl Seen {
    /// The value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.split("\r\n").skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The request line.
    pub fn request_line(&self) -> &str {
        self.head.split("\r\n").next().unwrap_or("")
    }
}

/// A real upstream on loopback, on threads: answers every request with a small JSON body (or
/// never answers), and records what it received.
pub struct Origin {
    pub addr: SocketAddr,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
}

impl Origin {
    /// An origin that answers `{"origin":"test"}` with status 200.
    pub fn start() -> Self {
        Self::spawn(false)
    }

    /// An origin that reads requests and never answers.
    pub fn hanging() -> Self {
        Self::spawn(true)
    }

    fn spawn(hang: bool) -> Self {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let addr = serve_http(move |seen, _body| {
            record.lock().unwrap().push(seen);
            if hang {
                std::thread::sleep(Duration::from_secs(3600));
            }
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 17\r\n\r\n{\"origin\":\"test\"}".to_vec()
        });
        Self { addr, seen }
    }

    /// Everything received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// An HTTP/1.1 server on a loopback port, a thread per connection, keeping connections alive:
/// `answer` gets each request's head and body (requests must carry their length) and returns
/// the whole response.
pub fn serve_http(answer: impl Fn(Seen, Vec<u8>) -> Vec<u8> + Send + Sync + 'static) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                loop {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let seen = Seen { head: String::from_utf8_lossy(&head).into_owned() };
                    let length: usize =
                        seen.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
                    let mut body = vec![0; length];
                    if stream.read_exact(&mut body).is_err() {
                        return;
                    }
                    if stream.write_all(&answer(seen, body)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// One response on a connection that stays open: its head and `Content-Length` bytes of body,
/// lower-cased.
pub fn read_one(stream: &mut impl Read) -> String {
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&raw).to_ascii_lowercase();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .expect("a Content-Length");
            if body.len() >= length {
                return text;
            }
        }
    }
}

/// A wrk script that POSTs `body` and counts every answer that is neither `v1` nor `v2`
/// (status and body): its `done` prints `BAD <count>` (and the first bad answer). Each wrk
/// thread has its own Lua state: `done` adds up the threads' counts.
pub fn two_answers_lua(dir: &Path, body: &[u8], v1: &(u16, String), v2: &(u16, String)) -> PathBuf {
    let lua = dir.join("check.lua");
    let quote = |s: &str| format!("{s:?}");
    std::fs::write(
        &lua,
        format!(
            r#"wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
bad = 0
local threads = {{}}
function setup(thread)
  table.insert(threads, thread)
end
function response(status, headers, body)
  if not ((status == {s1} and body == {v1}) or (status == {s2} and body == {v2})) then
    bad = bad + 1
    if first == nil then first = status .. " " .. body end
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("bad")
  end
  io.write(string.format("BAD %d\n", total))
  for _, thread in ipairs(threads) do
    local first = thread:get("first")
    if first ~= nil then io.write("FIRST BAD " .. first .. "\n") end
  end
end
"#,
            body = quote(std::str::from_utf8(body).unwrap()),
            s1 = v1.0,
            v1 = quote(&v1.1),
            s2 = v2.0,
            v2 = quote(&v2.1),
        ),
    )
    .unwrap();
    lua
}

/// wrk on `path`, running in the background.
pub fn wrk(
    args: &[&str],
    addr: std::net::SocketAddr,
    path: &str,
) -> std::thread::JoinHandle<std::process::Output> {
    let wrk =
        std::process::Command::new("wrk").args(args).arg(format!("http://{addr}{path}")).output();
    std::thread::spawn(move || wrk.expect("running wrk"))
}

/// wrk's report, once it has checked that wrk ran more than 1000 requests, with no socket
/// error (connect, read, write, timeout).
pub fn wrk_result(wrk: std::thread::JoinHandle<std::process::Output>) -> String {
    let out = wrk.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "wrk failed: {text}");
    assert!(!text.contains("Socket errors"), "{text}");
    let requests: u64 = text
        .lines()
        .find_map(|l| l.split_once(" requests in").map(|(n, _)| n.trim().to_owned()))
        .and_then(|n| n.parse().ok())
        .expect("wrk's request count");
    assert!(requests > 1000, "the load ran: {text}");
    text
}

/// `curl` against the admin API: the status and the body.
pub fn admin_api(
    gw: &Gateway,
    method: &str,
    path: &str,
    token: Option<&str>,
    form: &[String],
) -> (u16, String) {
    let url = format!("http://{}{path}", gw.admin);
    let mut args =
        vec!["-sS".to_owned(), "-o".into(), "-".into(), "-w".into(), "\n%{http_code}".into()];
    args.extend(["-X".into(), method.into()]);
    if let Some(token) = token {
        args.extend(["-H".into(), format!("authorization: Bearer {token}")]);
    }
    for part in form {
        args.extend(["-F".into(), part.clone()]);
    }
    args.push(url);
    let out = std::process::Command::new("curl").args(&args).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or_else(|| panic!("{text}"));
    (status.parse().unwrap_or_else(|_| panic!("{text}")), body.to_owned())
}

/// A deploy's form: the worker's TOML, written beside the configuration, and a module file.
pub fn deploy_form(dir: &std::path::Path, worker: &str, module: Option<&str>) -> Vec<String> {
    let file = dir.join("worker.toml");
    std::fs::write(&file, worker).unwrap();
    let mut parts = vec![format!("worker=@{}", file.display())];
    if let Some(module) = module {
        parts.push(format!("module=@{};type=application/wasm", dir.join(module).display()));
    }
    parts
}
