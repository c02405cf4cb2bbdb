//! Rate limits over real sockets: the rate and burst a closed-loop client gets, keys kept
//! apart, the 429 answer and its headers, `dry_run`, verified claims as keys, forwarded
//! addresses believed only from trusted proxies, and counts kept across a reload. Shared
//! policies with a real `redis-server`: two gateways held to one rate, and Redis killed, hung
//! and back.

use std::time::{Duration, Instant};

use edgegate_testkit::redis::{RedisServer, silent_server};
use edgegate_testkit::{HMAC_SECRET, Signer, now};

use crate::support::{Gateway, Reply, counter, http, metric_total};

fn config(policies: &str, route: &str, server: &str) -> String {
    format!(
        r#"
        [server]
        {server}

        {policies}

        [[routes]]
        name = "api"
        prefix = "/"
        respond = {{ status = 200, body = "ok" }}
        {route}
        "#
    )
}

fn get(gw: &Gateway, headers: &[(&str, &str)]) -> Reply {
    http(gw.addr, "GET", "/x", headers, b"")
}

#[test]
fn a_closed_loop_client_gets_the_burst_at_once_then_the_rate() {
    let policies = "[rate_limits.r]\nrequests = 50\nburst = 10";
    let gw = Gateway::start(&config(policies, "rate_limits = [\"r\"]", ""));
    // The burst passes at once, the next is refused.
    let first: Vec<u16> = (0..11).map(|_| get(&gw, &[]).status).collect();
    assert_eq!(first[..10], [200; 10], "{first:?}");
    assert_eq!(first[10], 429, "{first:?}");

    // Then, as fast as the client can ask, 50 a second: within ±5 % over 10 s.
    std::thread::sleep(Duration::from_millis(200)); // full again: 10 in the bucket
    let (passed, refused, seconds) = closed_loop(gw.addr, Duration::from_secs(10));
    within_5_percent(passed, 10.0 + 50.0 * seconds, seconds);
    assert!(refused > passed, "the client asked faster than the limit: {refused} refused");
    assert_eq!(counter(&gw, r#"edgegate_rate_limited_total{policy="r",route="api"}"#), refused + 1);
}

/// Asks the gateway at `addr` as fast as one client can for `length`: (passed, refused,
/// seconds taken).
fn closed_loop(addr: std::net::SocketAddr, length: Duration) -> (u64, u64, f64) {
    let started = Instant::now();
    let (mut passed, mut refused) = (0u64, 0u64);
    while started.elapsed() < length {
        match http(addr, "GET", "/x", &[], b"").status {
            200 => passed += 1,
            429 => refused += 1,
            other => panic!("status {other}"),
        }
    }
    (passed, refused, started.elapsed().as_secs_f64())
}

fn within_5_percent(passed: u64, expected: f64, seconds: f64) {
    let ratio = passed as f64 / expected;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "{passed} passed in {seconds:.2}s, {expected:.0} expected"
    );
}

#[test]
fn a_refusal_is_a_429_with_the_draft_s_headers_and_keys_are_apart() {
    let policies = r#"
        [rate_limits.per-key]
        requests = 1
        per = "1m"
        burst = 2
        key = ["header:x-api-key"]
    "#;
    let gw = Gateway::start(&config(policies, "rate_limits = [\"per-key\"]", ""));
    let a = [("x-api-key", "a")];
    assert_eq!(get(&gw, &a).status, 200);
    assert_eq!(get(&gw, &a).status, 200);
    let refused = get(&gw, &a);
    assert_eq!((refused.status, refused.error().as_str()), (429, "rate_limited"));
    assert_eq!(refused.header("ratelimit-policy"), Some("\"per-key\";q=1;w=60"));
    let state = refused.header("ratelimit").unwrap();
    let t: u64 = state.strip_prefix("\"per-key\";r=0;t=").unwrap().parse().unwrap();
    assert!((59..=60).contains(&t), "{state}: the burst is spent, one comes back in 60 s");
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(retry, t);
    // Another key is counted on its own; a request without the header is not counted.
    assert_eq!(get(&gw, &[("x-api-key", "b")]).status, 200);
    for _ in 0..5 {
        assert_eq!(get(&gw, &[]).status, 200);
    }
    let no_key =
        r#"edgegate_rate_limit_decisions_total{policy="per-key",route="api",outcome="no_key"}"#;
    assert_eq!(counter(&gw, no_key), 5);
}

#[test]
fn dry_run_counts_without_refusing() {
    let policies = "[rate_limits.d]\nrequests = 1\nper = \"1m\"\ndry_run = true";
    let gw = Gateway::start(&config(policies, "rate_limits = [\"d\"]", ""));
    for _ in 0..4 {
        assert_eq!(get(&gw, &[]).status, 200);
    }
    let series = |o: &str| {
        format!(r#"edgegate_rate_limit_decisions_total{{policy="d",route="api",outcome="{o}"}}"#)
    };
    assert_eq!(
        (counter(&gw, &series("allowed")), counter(&gw, &series("dry_run_limited"))),
        (1, 3)
    );
    assert_eq!(counter(&gw, r#"edgegate_rate_limited_total{policy="d",route="api"}"#), 0);
}

#[test]
fn forwarded_addresses_count_only_from_a_trusted_proxy() {
    let policies = "[rate_limits.ip]\nrequests = 1\nper = \"1m\"";
    let spoofed = |i: u32| format!("198.51.100.{i}");
    // Not trusted: every spoofed address is this one client.
    let gw = Gateway::start(&config(policies, "rate_limits = [\"ip\"]", ""));
    let statuses: Vec<u16> =
        (1..=3).map(|i| get(&gw, &[("x-forwarded-for", &spoofed(i))]).status).collect();
    assert_eq!(statuses, [200, 429, 429]);
    // Behind a trusted proxy (this loopback client stands for it): each is its own client,
    // and one repeated is counted.
    let trusted = Gateway::start(&config(
        policies,
        "rate_limits = [\"ip\"]",
        "trusted_proxies = [\"127.0.0.1\", \"::1\"]",
    ));
    let statuses: Vec<u16> =
        (1..=3).map(|i| get(&trusted, &[("x-forwarded-for", &spoofed(i))]).status).collect();
    assert_eq!(statuses, [200, 200, 200]);
    assert_eq!(get(&trusted, &[("x-forwarded-for", &spoofed(1))]).status, 429);
}

/// Behind a trusted proxy that appends to `X-Forwarded-For`, a client that sends its own
/// `Forwarded: for=…` with every request is still counted by the address the proxy wrote;
/// with `client_address_header = "forwarded"` it is the other way round.
#[test]
fn a_client_s_own_forwarded_header_does_not_choose_its_key() {
    let policies = "[rate_limits.ip]\nrequests = 1\nper = \"1m\"";
    let trusted = "trusted_proxies = [\"127.0.0.1\", \"::1\"]";
    let gw = Gateway::start(&config(policies, "rate_limits = [\"ip\"]", trusted));
    let own = |i: u32| format!("for=203.0.113.{i}");
    let statuses: Vec<u16> = (1..=3)
        .map(|i| get(&gw, &[("forwarded", &own(i)), ("x-forwarded-for", "198.51.100.1")]).status)
        .collect();
    assert_eq!(statuses, [200, 429, 429], "one client, whatever its own Forwarded says");

    let server = format!("{trusted}\nclient_address_header = \"forwarded\"");
    let gw = Gateway::start(&config(policies, "rate_limits = [\"ip\"]", &server));
    let statuses: Vec<u16> = (1..=3)
        .map(|i| {
            let proxy = format!("for=198.51.100.{i}");
            get(&gw, &[("forwarded", &proxy), ("x-forwarded-for", "203.0.113.1")]).status
        })
        .collect();
    assert_eq!(statuses, [200, 200, 200], "the proxy's Forwarded names three clients");
}

#[test]
fn a_claim_key_counts_verified_tokens_only() {
    let policies = r#"
        [rate_limits.per-user]
        requests = 1
        per = "1m"
        key = ["claim:sub"]
    "#;
    let route = r#"
        rate_limits = ["per-user"]
        [routes.identity]
        [routes.identity.jwt]
        audiences = ["api"]
        [[routes.identity.jwt.keys]]
        kid = "h1"
        alg = "HS256"
        secret_env = "RATE_TEST_SECRET"
    "#;
    let secret = std::str::from_utf8(HMAC_SECRET).unwrap();
    let gw =
        Gateway::start_with(&config(policies, route, ""), &[], &[("RATE_TEST_SECRET", secret)]);
    let hs = Signer::hs256();
    let token = |sub: &str, exp: i64| {
        let claims = serde_json::json!({"sub": sub, "aud": "api", "exp": exp});
        format!("Bearer {}", hs.token(Some("h1"), &claims))
    };
    let (ada, bob) = (token("ada", now() + 60), token("bob", now() + 60));
    assert_eq!(get(&gw, &[("authorization", &ada)]).status, 200);
    assert_eq!(get(&gw, &[("authorization", &ada)]).status, 429);
    assert_eq!(get(&gw, &[("authorization", &bob)]).status, 200, "another user");
    // Expired or forged: refused before any count, and never a key of its own.
    let expired = token("carol", now() - 60);
    let forged = format!("{}x", token("dave", now() + 60));
    for bad in [&expired, &forged] {
        assert_eq!(get(&gw, &[("authorization", bad)]).status, 401);
    }
    let decided = |o: &str| {
        counter(
            &gw,
            &format!(
                r#"edgegate_rate_limit_decisions_total{{policy="per-user",route="api",outcome="{o}"}}"#
            ),
        )
    };
    assert_eq!((decided("allowed"), decided("limited"), decided("no_key")), (2, 1, 0));
}

#[test]
fn a_reload_keeps_an_unchanged_policy_s_counts_and_resets_a_changed_one() {
    let policies = |requests: u32| format!("[rate_limits.r]\nrequests = {requests}\nper = \"1m\"");
    let gw = Gateway::start(&config(&policies(1), "rate_limits = [\"r\"]", ""));
    assert_eq!(get(&gw, &[]).status, 200);
    assert_eq!(get(&gw, &[]).status, 429);
    // The same policy, another route setting: still counted.
    gw.rewrite_config(&config(&policies(1), "rate_limits = [\"r\"]\nmethods = [\"GET\"]", ""));
    reload(&gw);
    assert_eq!(get(&gw, &[]).status, 429, "the count survived the reload");
    gw.rewrite_config(&config(&policies(2), "rate_limits = [\"r\"]", ""));
    reload(&gw);
    assert_eq!(get(&gw, &[]).status, 200, "a changed policy starts again");
}

fn reload(gw: &Gateway) {
    let reply = crate::support::reload(gw, None);
    assert_eq!(reply.status, 200, "{}", reply.text());
}

#[test]
fn two_gateways_sharing_redis_are_held_to_one_rate_together() {
    let Some(redis) = RedisServer::start("two_gateways_sharing_redis") else { return };
    // A generous timeout: on a busy two-core machine a slow answer must not fall back to a
    // count per process (which the test would see as twice the rate).
    let policies = format!(
        "[rate_limits.r]\nrequests = 100\nburst = 40\nkey = [\"route\"]\nscope = \"shared\"\n\
         url = {:?}\ntimeout = \"2s\"\non_error = \"fail_closed\"",
        redis.url()
    );
    let text = config(&policies, "rate_limits = [\"r\"]", "");
    let gateways = [Gateway::start(&text), Gateway::start(&text)];
    let length = Duration::from_secs(10);
    let runs: Vec<(u64, u64, f64)> = std::thread::scope(|s| {
        let clients: Vec<_> = gateways
            .iter()
            .map(|gw| gw.addr)
            .map(|a| s.spawn(move || closed_loop(a, length)))
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let passed: u64 = runs.iter().map(|r| r.0).sum();
    let seconds = runs.iter().map(|r| r.2).fold(0.0, f64::max);
    within_5_percent(passed, 40.0 + 100.0 * seconds, seconds);
    for (gw, (passed, refused, _)) in gateways.iter().zip(&runs) {
        assert!(*passed > 100 && *refused > *passed, "each client was limited: {runs:?}");
        let errors = metric_total(gw, "edgegate_rate_limit_redis_errors_total");
        assert_eq!(errors, 0, "every decision was Redis's");
    }
}

/// Policies `open` and `closed` on routes `/open` and `/closed`, counted per `x-user` in the
/// Redis at `url`.
fn failing_config(url: &str, timeout: &str) -> String {
    let policy = |name: &str, on_error: &str, requests: u32| {
        format!(
            "[rate_limits.{name}]\nrequests = {requests}\nper = \"1m\"\nscope = \"shared\"\n\
             url = {url:?}\ntimeout = {timeout:?}\non_error = {on_error:?}\n\
             key = [\"header:x-user\"]\n"
        )
    };
    let route = |name: &str| {
        format!(
            "[[routes]]\nname = {name:?}\npath = \"/{name}\"\nrespond = {{ status = 200 }}\n\
             rate_limits = [{name:?}]\n"
        )
    };
    [
        policy("open", "fail_open", 3),
        policy("closed", "fail_closed", 1000),
        route("open"),
        route("closed"),
    ]
    .concat()
}

/// The statuses of `n` requests of user `user` to `path`.
fn statuses(gw: &Gateway, path: &str, user: &str, n: usize) -> Vec<u16> {
    (0..n).map(|_| status(gw, path, user)).collect()
}

fn status(gw: &Gateway, path: &str, user: &str) -> u16 {
    http(gw.addr, "GET", path, &[("x-user", user)], b"").status
}

#[test]
fn redis_down_fails_open_to_a_local_count_or_closed_with_503_and_both_recover() {
    let Some(redis) = RedisServer::start("rate_limits_redis_down") else { return };
    let port = redis.port();
    let mut gw = Gateway::start(&failing_config(&redis.url(), "500ms"));
    // Redis decides: 3 a minute on /open.
    assert_eq!(statuses(&gw, "/open", "ada", 4), [200, 200, 200, 429]);
    assert_eq!(statuses(&gw, "/closed", "ada", 2), [200, 200]);

    redis.kill();
    // fail_closed: 503, retry in a second.
    let refused = http(gw.addr, "GET", "/closed", &[("x-user", "ada")], b"");
    assert_eq!((refused.status, refused.error().as_str()), (503, "rate_limit_unavailable"));
    assert_eq!(refused.header("retry-after"), Some("1"));
    // fail_open: this process counts on its own, from a full burst; the limit still holds.
    assert_eq!(statuses(&gw, "/open", "bob", 4), [200, 200, 200, 429]);
    assert!(counter(&gw, r#"edgegate_rate_limit_local_fallbacks_total{policy="open"}"#) >= 4);
    // Redis's refusal of ada holds without Redis: it is remembered until it ends.
    assert_eq!(status(&gw, "/open", "ada"), 429);
    let unavailable = r#"edgegate_rate_limit_decisions_total{policy="closed",route="closed",outcome="unavailable"}"#;
    assert_eq!(counter(&gw, unavailable), 1);

    // Redis is back, empty: both policies decide there again.
    let _redis = RedisServer::start_on(port).unwrap();
    crate::support::wait_until("fail_closed recovers", || status(&gw, "/closed", "ada") == 200);
    // Bob's local count is spent, his count in Redis is new: only Redis lets these through.
    crate::support::wait_until("fail_open decides in Redis again", || {
        status(&gw, "/open", "bob") == 200
    });
    assert_eq!(statuses(&gw, "/open", "bob", 3), [200, 200, 429]);
    let (status, log) = gw.stop();
    assert!(status.success(), "{log}");
    let warnings = log.matches("rate limit: Redis cannot decide").count();
    assert!((2..=4).contains(&warnings), "a warning per policy, not per request: {log}");
    assert!(log.contains("rate limit: Redis answers again"), "{log}");
}

#[test]
fn a_hung_redis_costs_one_timeout_then_is_left_alone_while_it_recovers() {
    let port = silent_server();
    let gw = Gateway::start(&failing_config(&format!("redis://127.0.0.1:{port}"), "100ms"));
    assert_eq!(statuses(&gw, "/closed", "ada", 5), [503; 5]);
    assert_eq!(statuses(&gw, "/open", "ada", 4), [200, 200, 200, 429]);
    let errors = |policy: &str, error: &str| {
        counter(
            &gw,
            &format!(
                r#"edgegate_rate_limit_redis_errors_total{{policy="{policy}",error="{error}"}}"#
            ),
        )
    };
    // The first decision of each waited for the timeout; the next ones, within a second, did
    // not ask.
    for (policy, asked) in [("closed", 5), ("open", 4)] {
        let (timeouts, skipped) = (errors(policy, "timeout"), errors(policy, "skipped"));
        assert_eq!(timeouts + skipped, asked, "{policy}");
        assert!(timeouts >= 1 && skipped >= asked - 2, "{policy}: {timeouts} timeouts");
    }
}

#[test]
fn a_refusal_from_redis_is_remembered_until_the_key_may_pass_and_no_longer() {
    let Some(redis) = RedisServer::start("rate_limits_remembered") else { return };
    // One request per 300 ms, no burst beyond it.
    let policies = format!(
        "[rate_limits.r]\nrequests = 1\nper = \"300ms\"\nkey = [\"route\"]\nscope = \"shared\"\n\
         url = {:?}\ntimeout = \"2s\"\non_error = \"fail_closed\"",
        redis.url()
    );
    let gw = Gateway::start(&config(&policies, "rate_limits = [\"r\"]", ""));
    let remembered = r#"edgegate_rate_limit_remembered_refusals_total{policy="r"}"#;
    assert_eq!(get(&gw, &[]).status, 200);
    // Redis refuses the next; the ones after it are refused here until the period is over.
    let refused: Vec<Reply> = (0..4).map(|_| get(&gw, &[])).collect();
    assert!(refused.iter().all(|r| r.status == 429 && r.header("retry-after") == Some("1")));
    assert_eq!(counter(&gw, remembered), 3, "one asked, three remembered");
    // No longer than Redis said (not the whole second `Retry-After` rounds up to): once the
    // period is over, the key passes.
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(get(&gw, &[]).status, 200);
    assert_eq!(counter(&gw, remembered), 3);
}

/// A KV namespace named `rate` in the Redis that holds a shared rate limit's counts: a worker
/// granted it cannot read, list or reset the counts (their key spaces cannot meet), and a
/// configuration whose namespace prefix would reach into them is refused.
#[test]
fn a_kv_namespace_cannot_reach_the_shared_rate_limits_counts() {
    let Some(redis) = RedisServer::start("a_kv_namespace_cannot_reach") else { return };
    let text = format!(
        r#"
        {runtime}
        [kv.rate]
        backend = "redis"
        url = {url:?}
        timeout = "2s"

        [workers.h]
        module = "{hostile}"
        kv = ["rate"]

        [rate_limits.per-ip]
        requests = 1
        per = "1m"
        scope = "shared"
        kv = "rate"
        timeout = "2s"
        on_error = "fail_closed"

        [[routes]]
        path = "/limited"
        respond = {{ status = 200, body = "ok" }}
        rate_limits = ["per-ip"]

        [[routes]]
        prefix = "/h"
        worker = "h"
        "#,
        runtime = crate::support::runtime_section(),
        url = redis.url(),
        hostile = edgegate_guests::HOSTILE,
    );
    let gw = Gateway::start(&text);
    let limited = || http(gw.addr, "GET", "/limited", &[], b"").status;
    assert_eq!((limited(), limited()), (200, 429));
    // The count's key as the policy writes it, after the prefix: what a namespace whose
    // keys shared the prefix would reach.
    let key = "per-ip:9:127.0.0.1";
    let kv =
        |op: &str| http(gw.addr, "POST", &format!("/h/kv?op={op}&ns=rate&key={key}"), &[], b"");
    assert_eq!(kv("get").text(), "(none)", "the count is not in the namespace");
    assert_eq!(kv("list").text(), "", "nor listed");
    assert_eq!(kv("delete").text(), "false", "nor deleted");
    assert_eq!(limited(), 429, "the client is still counted");

    // A namespace whose prefix lies inside the policy's: refused at load, naming both.
    let forged = text.replace(
        "timeout = \"2s\"\n\n        [workers.h]",
        "timeout = \"2s\"\n        key_prefix = \"edgegate:rate:per-ip:\"\n\n        [workers.h]",
    );
    assert_ne!(forged, text);
    let (_dir, path) = crate::support::write_config(&forged);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["check", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("rate_limits.per-ip") && stderr.contains("kv.rate"), "{stderr}");
}
