//! Rate limits over real sockets: the rate and burst a closed-loop client gets, keys kept
//! apart, the 429 answer and its headers, `dry_run`, verified claims as keys, forwarded
//! addresses believed only from trusted proxies, and counts kept across a reload.

use std::time::{Duration, Instant};

use edgegate_testkit::{HMAC_SECRET, Signer, now};

use crate::support::{Gateway, Reply, counter, http};

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
    let started = Instant::now();
    let (mut passed, mut refused) = (0u64, 0u64);
    while started.elapsed() < Duration::from_secs(10) {
        match get(&gw, &[]).status {
            200 => passed += 1,
            429 => refused += 1,
            other => panic!("status {other}"),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let expected = 10.0 + 50.0 * seconds;
    let ratio = passed as f64 / expected;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "{passed} passed in {seconds:.2}s, {expected:.0} expected"
    );
    assert!(refused > passed, "the client asked faster than the limit: {refused} refused");
    assert_eq!(counter(&gw, r#"edgegate_rate_limited_total{policy="r",route="api"}"#), refused + 1);
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
    let reply = http(gw.admin, "POST", "/reload", &[], b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
}
