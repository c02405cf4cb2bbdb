//! Reloading: the next snapshot swapped in whole or not at all, unchanged modules reused,
//! requests in flight finishing on the version they began with, and the admin endpoint,
//! all over real loopback sockets where a client would use them.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::servers::Upstream;
use super::{BUILTINS, request, send};
use crate::config::Loaded;
use crate::{Gateway, ReloadError, Server};

/// A configuration file in a directory of its own, with the worker `w` on `/w` from
/// `module.wasm` (which [`Site::deploy`] replaces).
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new(module: &[u8]) -> Self {
        let site = Self { dir: tempfile::tempdir().unwrap() };
        site.deploy(module);
        site.configure("");
        site
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("edgegate.toml")
    }

    /// Writes the module file, as a deploy would: a new file renamed over the old.
    fn deploy(&self, module: &[u8]) {
        let tmp = self.dir.path().join("module.wasm.tmp");
        std::fs::write(&tmp, module).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("module.wasm")).unwrap();
    }

    /// Writes the configuration, with `extra` after the worker's table.
    fn configure(&self, extra: &str) {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[runtime]\ncache = false\n\n\
             [workers.w]\nmodule = \"module.wasm\"\n{extra}\n\n[[routes]]\nprefix = \"/w\"\nworker = \"w\"\n"
        );
        std::fs::write(self.config(), text).unwrap();
    }

    async fn gateway(&self) -> Gateway {
        Gateway::build(&Loaded::from_file(&self.config()).unwrap(), BUILTINS).await.unwrap()
    }
}

const BODY: &str = r#"{ "a" : 1 }"#;

/// What a version answers to `POST /w` with [`BODY`].
async fn answer(g: &Gateway) -> (StatusCode, String) {
    let (status, _, body) = send(g, request(Method::POST, "/w", BODY)).await;
    (status, body)
}

#[tokio::test]
async fn a_reload_swaps_the_changed_module_and_reuses_the_unchanged() {
    let site = Site::new(edgegate_guests::ECHO_JSON);
    let g = site.gateway().await;
    let v1 = answer(&g).await;
    assert_eq!(v1, (StatusCode::OK, r#"{"a":1}"#.to_owned()));
    let digest1 = g.workers()[0].1.module_info().digest.clone();

    let same = g.reload().await.unwrap();
    assert_eq!(same.generation, 2);
    assert!(same.changed.is_empty() && same.modules.is_empty(), "{same:?}");
    assert_eq!(
        g.workers()[0].1.checked(),
        &edgegate_runtime::Checked::Unchanged,
        "an unchanged module is not read again"
    );

    site.deploy(edgegate_guests::JSON_TRANSFORM);
    let swapped = g.reload().await.unwrap();
    assert_eq!((swapped.generation, swapped.changed.clone()), (3, vec!["w".to_owned()]));
    let digest2 = &swapped.modules[0].1;
    assert_ne!(digest2, &digest1);
    assert_eq!(&g.workers()[0].1.module_info().digest, digest2);
    let v2 = answer(&g).await;
    assert_ne!(v2, v1, "the new version answers");

    site.deploy(edgegate_guests::ECHO_JSON);
    g.reload().await.unwrap();
    assert_eq!(answer(&g).await, v1, "and back");
}

#[tokio::test]
async fn an_invalid_reload_leaves_the_old_version_serving() {
    let site = Site::new(edgegate_guests::ECHO_JSON);
    let g = site.gateway().await;
    let v1 = answer(&g).await;
    let refuse = |error: ReloadError, needle: &str| {
        let text = crate::error::error_chain(&error);
        assert!(text.contains(needle), "`{needle}` not in: {text}");
    };

    std::fs::write(site.config(), "[workers.w\nmodule = ").unwrap();
    refuse(g.reload().await.unwrap_err(), "edgegate.toml");
    site.configure("");

    site.deploy(b"\0asm\x01\0\0\0garbage");
    refuse(g.reload().await.unwrap_err(), "workers.w.module");
    site.deploy(&std::fs::read(edgegate_guests::UNKNOWN_IMPORT).unwrap());
    refuse(g.reload().await.unwrap_err(), "teleport");
    site.deploy(edgegate_guests::ECHO_JSON);

    site.configure("limits = { memory = \"1GiB\" }");
    refuse(g.reload().await.unwrap_err(), "max_worker_memory");
    site.configure("");

    let text = std::fs::read_to_string(site.config()).unwrap();
    std::fs::write(site.config(), text.replace("[runtime]", "[runtime]\nepoch_tick = \"2ms\""))
        .unwrap();
    let error = g.reload().await.unwrap_err();
    assert!(matches!(&error, ReloadError::RestartNeeded { keys, .. } if keys == &["runtime"]));
    refuse(error, "restart");
    site.configure("");

    assert_eq!(g.generation(), 1, "nothing took effect");
    assert_eq!(answer(&g).await, v1);
    assert_eq!(g.reload().await.unwrap().generation, 2, "a good reload still works after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_in_flight_across_a_swap_finishes_on_its_version() {
    let slow = Upstream::start(|_| {
        std::thread::sleep(Duration::from_millis(600));
        Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(br#"{"slow":true}"#)))
            .unwrap()
    })
    .await;
    let fan_out = format!(
        "upstreams = [\"slow\"]\nconfig = {{ upstreams = \"slow\", prefix = \"/w\" }}\n\n\
         [upstreams.slow]\nurl = \"http://{}\"",
        slow.addr
    );
    let site = Site::new(edgegate_guests::FAN_OUT);
    site.configure(&fan_out);
    let g = Arc::new(site.gateway().await);

    let in_flight = tokio::spawn({
        let g = g.clone();
        async move { send(&g, request(Method::GET, "/w/x", "")).await }
    });
    while slow.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    site.deploy(edgegate_guests::ECHO_JSON);
    site.configure("");
    let reloaded = g.reload().await.unwrap();
    assert_eq!(reloaded.removed.len() + reloaded.changed.len(), 1);
    assert_eq!(answer(&g).await.1, r#"{"a":1}"#, "new requests get the new version");

    let (status, _, body) = in_flight.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"slow":{"slow":true}}"#));
}

/// Set in the child process that [`under_load_reloads_lose_no_request`] runs itself in.
const ALONE: &str = "EDGEGATE_TEST_ALONE";

/// Requests over real sockets, HTTP/1.1 and h2, while the worker is swapped back and forth:
/// none fails, every answer is one of the two versions', and the last version is the one
/// that answers at the end.
///
/// The memory bound reads this process's RSS, which counts whatever the other tests running
/// beside it hold live (50-95 MiB in full runs, against 7-8 MiB of the reloads' own): so the
/// test runs again in a process of its own, alone, and this one passes only if that one ran
/// and passed.
#[test]
fn under_load_reloads_lose_no_request() {
    let name = "tests::reload::under_load_reloads_lose_no_request";
    if std::env::var_os(ALONE).is_some() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        return runtime.block_on(reloads_under_load());
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "alone, the test failed or did not run:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn reloads_under_load() {
    let site = Site::new(edgegate_guests::ECHO_JSON);
    let g = site.gateway().await;
    let v1 = answer(&g).await;
    site.deploy(edgegate_guests::JSON_TRANSFORM);
    g.reload().await.unwrap();
    let v2 = answer(&g).await;
    assert_ne!(v1, v2);
    site.deploy(edgegate_guests::ECHO_JSON);
    g.reload().await.unwrap();

    let any = "127.0.0.1:0".parse().unwrap();
    let server = Server::bind(g, any, any, None).await.unwrap();
    let addr = server.local_addr().unwrap();
    let gateway = server.gateway().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let done = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for h2 in [false, true, false, true] {
        let (done, answers, v1, v2) = (done.clone(), answers.clone(), v1.clone(), v2.clone());
        clients.push(tokio::spawn(async move {
            let client = http_client(h2);
            while !done.load(Ordering::Relaxed) {
                let got = post(&client, addr).await;
                assert!(got == v1 || got == v2, "an answer from neither version: {got:?}");
                answers.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    let rss_before = rss();
    let (mut good, mut bad) = (0, 0);
    for i in 0..100 {
        if i % 10 == 9 {
            // Every tenth is preceded by an invalid one: bad TOML, a module that does not
            // compile, or one with an unknown import, in turn.
            match i / 10 % 3 {
                0 => std::fs::write(site.config(), "[workers.w\n").unwrap(),
                1 => site.deploy(b"not wasm"),
                _ => site.deploy(&std::fs::read(edgegate_guests::UNKNOWN_IMPORT).unwrap()),
            }
            assert!(gateway.reload().await.is_err());
            bad += 1;
            site.configure("");
        }
        site.deploy(if good % 2 == 0 {
            edgegate_guests::JSON_TRANSFORM
        } else {
            edgegate_guests::ECHO_JSON
        });
        gateway.reload().await.unwrap();
        good += 1;
    }
    done.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.expect("a client saw a failed request or a stranger's answer");
    }
    assert!(answers.load(Ordering::Relaxed) > 200, "the load ran");
    assert_eq!((good, bad), (100, 10));
    let last = if good % 2 == 1 { &v2 } else { &v1 };
    assert_eq!(&post(&http_client(false), addr).await, last, "only the last version answers");
    assert_eq!(gateway.generation(), 3 + 100);
    let grown = rss().saturating_sub(rss_before);
    assert!(grown < 64 << 20, "RSS grew {grown} bytes over 100 reloads");

    let _ = stop.send(());
    serving.await.unwrap();
}

type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

fn http_client(h2: bool) -> Client {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(h2)
        .build_http()
}

async fn post(client: &Client, addr: std::net::SocketAddr) -> (StatusCode, String) {
    let request = http::Request::post(format!("http://{addr}/w"))
        .body(Full::new(Bytes::from_static(BODY.as_bytes())))
        .unwrap();
    let response = client.request(request).await.expect("the request failed");
    let status = response.status();
    let body = response.into_body().collect().await.expect("the body failed").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The process's resident memory, after the allocator has returned what it keeps free (as the
/// gateway's trim thread does every 10 s): what glibc keeps in its arenas is not the reloads'.
fn rss() -> u64 {
    // SAFETY: `malloc_trim` only releases free memory; it is safe to call at any time.
    unsafe { libc::malloc_trim(0) };
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
