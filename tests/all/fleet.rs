//! A fleet on one machine: three gateways sharing one Redis and one registry, each with its
//! own module cache (as each node of a fleet has). A new worker version is pushed under its
//! tag and each gateway reloaded in turn while wrk drives all three: no request fails, every
//! gateway ends on the new digest, and what is written to KV through one is read through the
//! others.

use edgegate_testkit::redis::RedisServer;
use edgegate_testkit::registry::Registry;

use crate::registry::publish;
use crate::support::{
    Gateway, get, http, metric_line, metric_total, post, reload, two_answers_lua, wait_until, wrk,
    wrk_result,
};

const TOKEN: &str = "fleet-s3cret-0123456789abcdef0123456789";
const BODY: &[u8] = br#"{ "a" : 1 }"#;

fn answer(gw: &Gateway) -> (u16, String) {
    let reply = post(gw.addr, "/api", BODY);
    (reply.status, reply.text())
}

/// Written through `from`, read through every gateway.
fn kv_is_shared(from: &Gateway, all: &[Gateway], key: &str, value: &str) {
    let path = format!("/kv/{key}");
    assert_eq!(http(from.addr, "PUT", &path, &[], value.as_bytes()).status, 204);
    for gw in all {
        let read = get(gw.addr, &path);
        assert_eq!((read.status, read.text()), (200, value.to_owned()), "read through {}", gw.addr);
    }
}

#[test]
#[ignore = "saturates the CPUs: run alone, as scripts/test does"]
fn a_fleet_rolls_a_new_worker_version_under_load_and_shares_its_kv() {
    if !crate::bench::wrk_installed() {
        return;
    }
    let Some(redis) = RedisServer::start("fleet") else { return };
    let Some(registry) = Registry::start("fleet") else { return };
    let dir = tempfile::tempdir().unwrap();
    let api = format!("oci://{}/workers/api:live", registry.host());
    let kv = format!("oci://{}/workers/kv:live", registry.host());
    publish(dir.path(), edgegate_guests::ECHO_JSON, &api);
    publish(dir.path(), edgegate_guests::KV_LOOKUP, &kv);
    let config = dir.path().join("edgegate.toml");
    std::fs::write(
        &config,
        format!(
            r#"
            [server]
            queue_timeout = "5s"

            [kv.shared]
            backend = "redis"
            url = {url:?}
            timeout = "500ms"

            [workers.api]
            module = {api:?}

            [workers.kv]
            module = {kv:?}
            kv = ["shared"]
            config = {{ namespace = "shared" }}

            [[routes]]
            prefix = "/api"
            worker = "api"

            [[routes]]
            prefix = "/kv/"
            worker = "kv"
            "#,
            url = redis.url(),
        ),
    )
    .unwrap();
    let fleet: Vec<Gateway> = (0..3)
        .map(|node| {
            let cache = dir.path().join(format!("node-{node}"));
            let env = [
                ("XDG_CACHE_HOME", cache.to_str().unwrap()),
                ("EDGEGATE_ADMIN_TOKEN", TOKEN),
                ("DOCKER_CONFIG", "/nonexistent"),
            ];
            Gateway::start_at(&config, &env)
        })
        .collect();
    kv_is_shared(&fleet[0], &fleet, "greeting", "hello from node 0");

    // The two versions' answers to the load's request: the one serving, and the next (from
    // a gateway of its own, off to the side).
    let v1 = answer(&fleet[0]);
    let v2 = {
        let side = dir.path().join("side.toml");
        let text = "[runtime]\ncache = false\n[workers.api]\nmodule = \"builtin:json-transform\"\n\
             [[routes]]\nprefix = \"/api\"\nworker = \"api\"\n";
        std::fs::write(&side, text).unwrap();
        answer(&Gateway::start_at(&side, &[]))
    };
    assert_ne!(v1, v2);

    // wrk on each gateway; every answer must be one version's or the other's.
    let lua = two_answers_lua(dir.path(), BODY, &v1, &v2);
    let load: Vec<_> = fleet
        .iter()
        .map(|gw| wrk(&["-t1", "-c4", "-d12s", "-s", lua.to_str().unwrap()], gw.addr, "/api"))
        .collect();
    for gw in &fleet {
        wait_until("wrk's load arrives", || metric_total(gw, "edgegate_requests_total") > 10);
    }
    let started = std::time::Instant::now();
    publish(dir.path(), edgegate_guests::JSON_TRANSFORM, &api);
    for gw in &fleet {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let reloaded = reload(gw, Some(TOKEN));
        assert_eq!(reloaded.status, 200, "{}", reloaded.text());
        assert_eq!(reloaded.json()["changed"], serde_json::json!(["api"]), "only the new tag");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "wrk ended before the rollout");
    for (gw, wrk) in fleet.iter().zip(load) {
        let text = wrk_result(wrk);
        assert!(text.contains("BAD 0\n"), "{}: wrong or failed answers:\n{text}", gw.addr);
    }

    // Every gateway serves the new digest, and KV is still one store.
    let digest = edgegate_runtime::module_digest(edgegate_guests::JSON_TRANSFORM);
    for gw in &fleet {
        assert_eq!(answer(gw), v2);
        let series = format!("edgegate_worker_info{{worker=\"api\",digest=\"{digest}\"}} 1");
        assert!(metric_line(gw, &series).is_some(), "{}: no {series}", gw.addr);
    }
    kv_is_shared(&fleet[2], &fleet, "greeting", "hello from node 2");
}
