//! The container image (`deploy/container`): built FROM scratch with podman from the binary
//! under test, run with a read-only root file system as its non-root user, its configuration
//! mounted and its module cache on a volume; it answers a request, stores the compiled module,
//! and `podman stop` (SIGTERM) drains it to a clean exit.
//!
//! Without podman, or where podman cannot run a container, the test says so loudly and checks
//! nothing; with EDGEGATE_REQUIRE_PODMAN=1 (as in CI) that is a failure.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::http;

fn podman(args: &[&str]) -> Output {
    Command::new("podman").args(args).output().expect("podman runs")
}

fn said(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// Says why the test checks nothing, or fails when podman is required.
fn skip(why: &str) {
    crate::support::skipped("the container image", why, "EDGEGATE_REQUIRE_PODMAN");
}

/// Removes the container, its cache volume and the image when the test ends, however it ends.
struct Cleanup<'a> {
    container: &'a str,
    image: &'a str,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", "-t", "0", self.container]);
        let _ = podman(&["volume", "rm", "-f", self.container]);
        let _ = podman(&["rmi", "-f", self.image]);
    }
}

/// `--ulimit` within this process's limits: podman's defaults (a million open files, four
/// million processes) pass a sandbox's hard limits, and raising a hard limit is refused. Open
/// files at this process's limits; processes at 4,096 at most (a gateway runs a few threads),
/// as this VM refuses even its own process limit inside a container, and a lower one passes.
fn host_limits() -> Vec<String> {
    use rustix::process::{Resource, getrlimit};
    let files = getrlimit(Resource::Nofile);
    let value = |v: Option<u64>| v.map_or("-1".to_owned(), |v| v.to_string());
    let procs = getrlimit(Resource::Nproc).current.unwrap_or(u64::MAX).min(4096);
    [
        format!("nofile={}:{}", value(files.current), value(files.maximum)),
        format!("nproc={procs}:{procs}"),
    ]
    .into_iter()
    .flat_map(|limit| ["--ulimit".to_owned(), limit])
    .collect()
}

/// Whether an HTTP request to `addr` gets an HTTP answer.
fn answers(addr: std::net::SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut head = [0; 12];
    stream.write_all(b"GET /none HTTP/1.1\r\nhost: x\r\n\r\n").is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.starts_with(b"HTTP/1.1 ")
}

const CONFIG: &str = r#"
[server]
listen = "0.0.0.0:8080"
admin = "0.0.0.0:9090"
shutdown_timeout = "5s"

[runtime]
cache_dir = "/var/cache/edgegate"

[workers.echo]
module = "builtin:echo-json"

[[routes]]
prefix = "/echo"
worker = "echo"
"#;

#[test]
fn the_image_serves_read_only_as_non_root_and_drains_on_sigterm() {
    if Command::new("podman").arg("--version").output().is_err() {
        return skip("podman is not installed (Debian: apt-get install podman)");
    }
    let id = std::process::id();
    let (image, container) =
        (format!("localhost/edgegate-test:{id}"), format!("edgegate-test-{id}"));
    let _cleanup = Cleanup { container: &container, image: &image };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = Command::new(repo.join("deploy/container/build"))
        .arg(&image)
        .env("EDGEGATE_BINARY", env!("CARGO_BIN_EXE_edgegate"))
        .output()
        .unwrap();
    assert!(built.status.success(), "deploy/container/build: {}", said(&built));
    let user = podman(&["image", "inspect", "--format", "{{.Config.User}}", &image]);
    assert_eq!(String::from_utf8_lossy(&user.stdout).trim(), "65532:65532");

    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("edgegate.toml"), CONFIG).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let volume = format!("{}:/etc/edgegate:ro", site.path().display());
    let publish = format!("127.0.0.1:{port}:8080");
    let mut args: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), container.clone()];
    args.push("--read-only".into());
    args.extend(host_limits());
    // Debian's podman runs crun, which refuses a host with cgroups v1 and v2 mounted together
    // (as this VM has them); runc, also Debian's, runs there.
    if Command::new("runc").arg("--version").output().is_ok() {
        args.extend(["--runtime".into(), "runc".into()]);
    }
    // The module cache on a new volume, named as the container, which takes the image
    // directory's owner.
    let cache = format!("{container}:/var/cache/edgegate");
    let rest = ["-v", &cache, "-v", &volume, "-p", &publish];
    args.extend(rest.map(String::from));
    args.extend(
        ["-e", "EDGEGATE_ADMIN_TOKEN=a-test-token-0123456789abcdef0123456789", &image]
            .map(String::from),
    );
    let run = podman(&args.iter().map(String::as_str).collect::<Vec<_>>());
    if !run.status.success() {
        return skip(&format!("podman cannot run a container here: {}", said(&run)));
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    // Until the gateway answers through podman's port: a bare connect may be the port
    // forwarder's alone, so a whole exchange is the test.
    while !answers(addr) {
        let logs = said(&podman(&["logs", &container]));
        assert!(started.elapsed() < Duration::from_secs(60), "no answer in 60 s: {logs}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let reply = http(addr, "POST", "/echo", &[], b"{ \"a\" : 1 }");
    assert_eq!((reply.status, reply.text().as_str()), (200, r#"{"a":1}"#));
    // It runs as 65532, not root, and SIGTERM drains it to exit 0.
    let top = podman(&["top", &container, "huser", "user"]);
    assert!(said(&top).contains("65532"), "{}", said(&top));
    let stop = podman(&["stop", "-t", "20", &container]);
    assert!(stop.status.success(), "{}", said(&stop));
    let code = podman(&["inspect", "--format", "{{.State.ExitCode}}", &container]);
    let logs = said(&podman(&["logs", &container]));
    assert_eq!(String::from_utf8_lossy(&code.stdout).trim(), "0", "{logs}");
    assert!(logs.contains("drained"), "{logs}");
    // The compiled module went into the cache: its user may write there, and nowhere else.
    assert!(
        logs.contains("worker=echo module=builtin:echo-json") && logs.contains("cache=Miss"),
        "{logs}"
    );
}
