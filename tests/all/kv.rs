//! KV and fetch through the real binary: the demo's routes, durability on disk, Redis shared
//! by two gateways and restarted under them, and the fetch allow-list and caps.

use std::time::{Duration, Instant};

use edgegate_testkit::redis::RedisServer;

use crate::support::{Gateway, Origin, get, http, runtime_section, spinning_hostile_with};

fn put(addr: std::net::SocketAddr, path: &str, body: &[u8]) -> crate::support::Reply {
    http(addr, "PUT", path, &[], body)
}

#[test]
fn demo_serves_kv_and_fans_out() {
    let gw = Gateway::demo(&[]);
    let profile = get(gw.addr, "/kv/user:7");
    assert_eq!(profile.status, 200, "{}", profile.text());
    assert_eq!(profile.body.len(), 256, "the db-lookup workload's 256-byte row");
    assert_eq!(profile.header("content-type"), Some("application/json"));
    assert_eq!(profile.json()["id"], 7);
    assert_eq!(get(gw.addr, "/kv/user%3A7").body, profile.body, "percent-decoded keys");

    assert_eq!(get(gw.addr, "/kv/nobody").status, 404);
    assert_eq!(put(gw.addr, "/kv/greeting", b"hello").status, 204);
    assert_eq!(get(gw.addr, "/kv/greeting").text(), "hello");
    assert_eq!(http(gw.addr, "DELETE", "/kv/greeting", &[], b"").status, 204);
    assert_eq!(get(gw.addr, "/kv/greeting").status, 404);
    // The same namespace through the demo's wasi:http component (wasi:keyvalue).
    let through_component = get(gw.addr, "/component/kv/user:7");
    assert_eq!(through_component.status, 200, "{}", through_component.text());
    assert_eq!(through_component.body, profile.body, "the same row, byte for byte");
    assert_eq!(through_component.header("content-type"), Some("application/json"));
    assert_eq!(put(gw.addr, "/component/kv/from-component", b"written").status, 204);
    assert_eq!(get(gw.addr, "/kv/from-component").text(), "written", "a module reads it");
    assert_eq!(get(gw.addr, "/component/kv/nobody").error(), "not_found");
    let long = format!("/kv/{}", "k".repeat(513));
    assert_eq!(get(gw.addr, &long).status, 400, "a key over 512 bytes");
    assert_eq!(put(gw.addr, "/kv/", b"x").status, 400, "an empty key");

    let merged = get(gw.addr, "/fanout/profile?id=1");
    assert_eq!(merged.status, 200, "{}", merged.text());
    let merged = merged.json();
    for upstream in ["service-a", "service-b"] {
        assert_eq!(merged[upstream]["upstream"], upstream, "{merged}");
        assert_eq!(merged[upstream]["path"], "/profile");
        assert_eq!(merged[upstream]["query"], "id=1");
    }
}

/// A config serving kv-lookup under `/kv/` on the namespace `ns`, defined by `kv_table`.
fn kv_config(kv_table: &str, limits: &str) -> String {
    format!(
        r#"
        {runtime}
        [kv.ns]
        {kv_table}

        [workers.kv]
        module = "builtin:kv-lookup"
        kv = ["ns"]
        config = {{ namespace = "ns" }}
        limits = {{ {limits} }}

        [workers.ungranted]
        module = "builtin:kv-lookup"
        config = {{ namespace = "ns", prefix = "/no/" }}

        [[routes]]
        prefix = "/kv/"
        worker = "kv"

        [[routes]]
        prefix = "/no/"
        worker = "ungranted"
        "#,
        runtime = runtime_section(),
    )
}

/// [`kv_config`] on a redb file in a fresh directory (kept alive by the returned guard).
fn redb_config() -> (tempfile::TempDir, String) {
    let data = tempfile::tempdir().unwrap();
    let path = data.path().join("kv.redb").display().to_string();
    let config = kv_config(&format!("backend = \"redb\"\npath = {path:?}"), "");
    (data, config)
}

#[test]
fn an_acknowledged_redb_write_survives_kill_9() {
    let (_data, config) = redb_config();
    let gw = Gateway::start(&config);
    assert_eq!(put(gw.addr, "/kv/order:1", b"paid").status, 204);
    assert_eq!(put(gw.addr, "/kv/order:2", b"shipped").status, 204);
    gw.signal(rustix::process::Signal::KILL);
    drop(gw);

    let gw = Gateway::start(&config);
    assert_eq!(get(gw.addr, "/kv/order:1").text(), "paid");
    assert_eq!(get(gw.addr, "/kv/order:2").text(), "shipped");
}

#[test]
fn kv_limits_and_grants_have_statuses() {
    let gw = Gateway::start(&kv_config("backend = \"memory\"", r#"kv_value = "1KiB""#));
    assert_eq!(put(gw.addr, "/kv/a", &[b'x'; 1024]).status, 204);
    let over = put(gw.addr, "/kv/b", &[b'x'; 1025]);
    assert_eq!((over.status, over.error()), (413, "too_large".to_owned()));
    assert_eq!(get(gw.addr, "/kv/b").status, 404, "nothing was stored");
    let ungranted = get(gw.addr, "/no/a");
    assert_eq!((ungranted.status, ungranted.error()), (500, "namespace_not_granted".to_owned()));
    assert_eq!(get(gw.addr, "/kv/a").body.len(), 1024, "the gateway still serves");
}

#[test]
fn redis_is_shared_by_two_gateways_and_survives_a_restart() {
    let Some(redis) = RedisServer::start("redis_is_shared_by_two_gateways") else { return };
    let port = redis.port();
    let config = kv_config(
        &format!("backend = \"redis\"\nurl = {:?}\ntimeout = \"200ms\"", redis.url()),
        "",
    );
    let one = Gateway::start(&config);
    let two = Gateway::start(&config);
    assert_eq!(put(one.addr, "/kv/session:9", b"ada").status, 204);
    assert_eq!(
        get(two.addr, "/kv/session:9").text(),
        "ada",
        "written on one node, read on another"
    );

    redis.kill();
    for gw in [&one, &two] {
        let started = Instant::now();
        let down = get(gw.addr, "/kv/session:9");
        assert_eq!((down.status, down.error()), (503, "store_unavailable".to_owned()));
        assert_eq!(down.header("retry-after"), Some("1"));
        assert!(started.elapsed() < Duration::from_secs(2), "no hang: {:?}", started.elapsed());
    }

    let _redis = RedisServer::start_on(port).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while put(one.addr, "/kv/session:9", b"back").status != 204 {
        assert!(Instant::now() < deadline, "no recovery after Redis came back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let reply = get(two.addr, "/kv/session:9");
        if reply.status == 200 {
            assert_eq!(reply.text(), "back");
            break;
        }
        assert_eq!(reply.status, 503, "{}", reply.text());
        assert!(Instant::now() < deadline, "the second gateway did not recover");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn fetch_is_held_to_its_allow_list_caps_and_timeouts() {
    let origin = Origin::start();
    let hanging = Origin::hanging();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let allowed = |addr: std::net::SocketAddr| format!("\"http://{addr}\"");
    let config = format!(
        "{}\n[fetch]\nfirst_byte_timeout = \"300ms\"\n",
        spinning_hostile_with(
            "",
            r#", subrequests = 3, subrequest_body = "16B""#,
            &format!(
                "fetch = [{}, {}, {}]",
                allowed(origin.addr),
                allowed(hanging.addr),
                allowed(closed)
            )
        )
    );
    let gw = Gateway::start(&config);
    let fetch = |url: &str, n: u32| {
        let reply = get(gw.addr, &format!("/h/fetch?url={url}&n={n}"));
        (reply.status, reply.text())
    };
    let url = |addr: std::net::SocketAddr, path: &str| format!("http://{addr}{path}");

    // Allowed: three at once, within the cap (the body is 17 bytes: over the 16-byte cap).
    assert_eq!(fetch(&url(origin.addr, "/x"), 1), (500, "LimitExceeded".into()));
    assert_eq!(origin.seen().len(), 1, "it was sent");
    assert!(origin.seen()[0].request_line().starts_with("GET /x "));
    // Over the subrequest cap: refused before any is sent.
    let sent = origin.seen().len();
    assert_eq!(fetch(&url(origin.addr, "/y"), 4), (500, "LimitExceeded".into()));
    assert!(origin.seen().len() <= sent + 3, "at most the cap was sent");
    // Not in the allow-list: another port, another host, another scheme, an ungranted upstream.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let not_allowed = [
        url(other.local_addr().unwrap(), "/"),
        format!("http://localhost:{}/", origin.addr.port()),
        format!("https://{}/", origin.addr),
        "upstream://service-a/".to_owned(),
    ];
    for target in not_allowed {
        assert_eq!(fetch(&target, 1), (500, "NotGranted".into()), "{target}");
    }
    assert_eq!(fetch("/relative", 1), (500, "InvalidArgument".into()));
    // Failing destinations: refused, hanging.
    assert_eq!(fetch(&url(closed, "/"), 1), (500, "Unavailable".into()));
    let started = Instant::now();
    assert_eq!(fetch(&url(hanging.addr, "/"), 1), (500, "Timeout".into()));
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_eq!(get(gw.addr, "/h/ok").text(), "ok");
}

#[test]
fn fetch_returns_whole_responses() {
    let origin = Origin::start();
    let config = spinning_hostile_with("", "", &format!("fetch = [\"http://{}\"]", origin.addr));
    let gw = Gateway::start(&config);
    let reply = get(gw.addr, &format!("/h/fetch?url=http://{}/a&n=3", origin.addr));
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.text(), "200 {\"origin\":\"test\"}\n".repeat(3));
    assert_eq!(origin.seen().len(), 3);
}

#[test]
fn check_leaves_a_running_gateways_store_alone_and_names_a_bad_seed() {
    let (_data, config) = redb_config();
    let gw = Gateway::start(&config);
    assert_eq!(put(gw.addr, "/kv/k", b"v").status, 204);
    // The serving gateway holds the redb file's lock: check must not need it.
    let (dir, file) = crate::support::write_config(&config);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(get(gw.addr, "/kv/k").text(), "v");

    std::fs::write(dir.path().join("seed.ndjson"), "{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":\n")
        .unwrap();
    std::fs::write(&file, kv_config("seed = \"seed.ndjson\"", "")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kv.ns.seed") && stderr.contains("line 2"), "{stderr}");
}
