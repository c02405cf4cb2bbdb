//! Split routes through the gateway, to two real loopback upstreams that say who they are:
//! the weighted ratio, stickiness across requests and reloads, a ramp that moves users one
//! way only, the rules, claims of a verified token, and the override header.

use std::io::Write;

use edgegate_testkit::{Signer, now};

use super::servers::Upstream;
use super::*;
use crate::gateway::ReloadError;

/// Two upstreams answering `legacy` and `wasm`.
async fn sides() -> (Upstream, Upstream) {
    let answer = |body: &'static str| {
        move |_: &super::servers::Seen| {
            http::Response::new(Full::new(Bytes::from_static(body.as_bytes())))
        }
    };
    (Upstream::start(answer("legacy")).await, Upstream::start(answer("wasm")).await)
}

/// A configuration file whose `/api` route splits between the two sides, `wasm` weighing
/// `weight` against `100 - weight`, with `split` added to the split table.
fn config(sides: &(Upstream, Upstream), weight: u32, split: &str) -> String {
    format!(
        r#"
        [runtime]
        cache = false

        [upstreams.node]
        url = "http://{legacy}"

        [upstreams.edge]
        url = "http://{wasm}"

        [[routes]]
        name = "api"
        prefix = "/api"

        [routes.split]
        targets = [
          {{ name = "legacy", upstream = "node", weight = {rest} }},
          {{ name = "wasm", upstream = "edge", weight = {weight} }},
        ]
        {split}
        "#,
        legacy = sides.0.addr,
        wasm = sides.1.addr,
        rest = 100 - weight,
    )
}

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new(text: &str) -> Self {
        let site = Self { dir: tempfile::tempdir().unwrap() };
        site.write(text);
        site
    }

    fn write(&self, text: &str) {
        let mut file = std::fs::File::create(self.dir.path().join("edgegate.toml")).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    async fn gateway(&self) -> Gateway {
        let loaded = Loaded::from_file(&self.dir.path().join("edgegate.toml")).unwrap();
        Gateway::build(&loaded, BUILTINS).await.unwrap()
    }
}

/// Which side answered a GET of `/api` with `headers`.
async fn side(g: &Gateway, headers: &[(&str, &str)]) -> String {
    let mut request = Request::get("/api/orders?x=1").header("host", "api.example");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (status, _, body) = send(g, request.body(Full::new(Bytes::new())).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn user(i: usize) -> String {
    format!("user-{i}")
}

#[tokio::test]
async fn the_weights_hold_within_two_percent_sticky_or_random() {
    let sides = sides().await;
    let site = Site::new(&config(&sides, 30, "sticky = { header = \"x-user\" }"));
    let g = site.gateway().await;
    let (mut sticky, mut random) = (0, 0);
    for i in 0..10_000 {
        let id = user(i);
        sticky += usize::from(side(&g, &[("x-user", &id)]).await == "wasm");
        random += usize::from(side(&g, &[]).await == "wasm");
    }
    for (what, n) in [("sticky", sticky), ("random", random)] {
        let share = n as f64 / 10_000.0;
        assert!((share - 0.30).abs() <= 0.02, "{what}: {share} on the 30 % side");
    }
}

#[tokio::test]
async fn a_user_stays_on_one_side_across_requests_and_reloads_and_a_ramp_only_moves_users_over() {
    let sides = sides().await;
    let sticky = "sticky = { cookie = \"uid\" }";
    let site = Site::new(&config(&sides, 10, sticky));
    let g = site.gateway().await;
    let cookie = |i: usize| format!("theme=dark; uid={}", user(i));
    let mut at_10 = Vec::new();
    for i in 0..2_000 {
        at_10.push(side(&g, &[("cookie", &cookie(i))]).await);
    }
    // One user, 10 000 requests: one side.
    let one = cookie(7);
    for _ in 0..10_000 {
        assert_eq!(side(&g, &[("cookie", &one)]).await, at_10[7]);
    }
    // A reload that changes nothing of the split keeps everyone where they were.
    site.write(&config(&sides, 10, &format!("{sticky}\n# reloaded")));
    g.reload().await.unwrap();
    for (i, before) in at_10.iter().enumerate().take(500) {
        assert_eq!(&side(&g, &[("cookie", &cookie(i))]).await, before, "user {i}");
    }
    // 10 % → 50 %: users move from legacy to wasm, none back.
    site.write(&config(&sides, 50, sticky));
    g.reload().await.unwrap();
    let mut moved = 0;
    for (i, before) in at_10.iter().enumerate() {
        let now = side(&g, &[("cookie", &cookie(i))]).await;
        assert!(!(before == "wasm" && now == "legacy"), "user {i} moved back");
        moved += usize::from(before == "legacy" && now == "wasm");
    }
    let share = moved as f64 / at_10.len() as f64;
    assert!((share - 0.40).abs() < 0.04, "{share} moved over");
}

#[tokio::test]
async fn rules_come_before_the_weights() {
    let sides = sides().await;
    let rules = r#"
        rules = [
          { header = "x-beta", value = "1", target = "wasm" },
          { header = "x-channel", prefix = "can", target = "wasm" },
          { cookie = "engine", value = "wasm", target = "wasm" },
          { query = "engine", value = "wasm", target = "wasm" },
          { user_agent = "LegacyApp/", target = "legacy" },
          { user_agent = "(?i)^curl/8", regex = true, target = "wasm" },
        ]"#;
    // All weight on legacy: only rules reach wasm.
    let site = Site::new(&config(&sides, 0, rules));
    let g = site.gateway().await;
    assert_eq!(side(&g, &[]).await, "legacy");
    for headers in [
        vec![("x-beta", "1")],
        vec![("x-channel", "canary-7")],
        vec![("cookie", "a=b; engine=wasm")],
        vec![("user-agent", "CURL/8.5.0")],
    ] {
        assert_eq!(side(&g, &headers).await, "wasm", "{headers:?}");
    }
    for headers in [
        vec![("x-beta", "10")],
        vec![("x-channel", "stable")],
        vec![("cookie", "engine=wasmx")],
        vec![("user-agent", "curl/7.88")],
        // The first rule that matches wins: LegacyApp before the curl regex.
        vec![("user-agent", "LegacyApp/2 curl/8")],
    ] {
        assert_eq!(side(&g, &headers).await, "legacy", "{headers:?}");
    }
    let request = |q: &str| {
        Request::get(format!("/api?{q}")).header("host", "h").body(Full::new(Bytes::new())).unwrap()
    };
    assert_eq!(send(&g, request("a=1&engine=wasm")).await.2, "wasm");
    assert_eq!(send(&g, request("engine=wasm2")).await.2, "legacy");
}

#[tokio::test]
async fn the_override_header_counts_only_with_the_admin_token_and_never_goes_on() {
    let sides = sides().await;
    let site = Site::new(&config(&sides, 0, ""));
    let mut g = site.gateway().await;
    let pick = [("x-edgegate-target", "wasm")];
    assert_eq!(side(&g, &pick).await, "legacy", "no token is set: ignored");
    g.token = crate::config::token::Token::new("s3cret");
    assert_eq!(side(&g, &pick).await, "legacy", "without the token: ignored");
    let wrong = [pick[0], ("x-edgegate-admin-token", "guess")];
    assert_eq!(side(&g, &wrong).await, "legacy", "with a wrong token: ignored");
    let right = [pick[0], ("x-edgegate-admin-token", "s3cret")];
    assert_eq!(side(&g, &right).await, "wasm");
    let seen = sides.1.requests();
    let forwarded = &seen.last().unwrap().headers;
    assert!(forwarded.get("x-edgegate-admin-token").is_none(), "the token went upstream");
    assert!(forwarded.get("x-edgegate-target").is_none());
}

#[tokio::test]
async fn a_split_naming_what_does_not_exist_is_refused() {
    let sides = sides().await;
    let bad = config(&sides, 10, "rules = [{ header = \"x\", value = \"1\", target = \"nope\" }]");
    let site = Site::new(&config(&sides, 10, ""));
    let g = site.gateway().await;
    site.write(&bad);
    let error = g.reload().await.unwrap_err();
    assert!(
        matches!(&error, ReloadError::Config(e) if e.key.as_deref() == Some("routes[0].split.rules[0].target")),
        "{error}"
    );
}

/// A split whose `wasm` side is the hostile worker, falling back to the legacy upstream.
fn fallback_config(legacy: &Upstream) -> String {
    format!(
        r#"
        [runtime]
        cache = false

        [workers.hostile]
        module = "{hostile}"

        [upstreams.node]
        url = "http://{legacy}"

        [[routes]]
        name = "api"
        prefix = "/api"

        [routes.split]
        targets = [
          {{ name = "legacy", upstream = "node", weight = 0 }},
          {{ name = "wasm", worker = "hostile", weight = 100 }},
        ]
        fallback = "legacy"
        "#,
        hostile = edgegate_guests::HOSTILE,
        legacy = legacy.addr,
    )
}

#[tokio::test]
async fn a_worker_that_fails_falls_back_for_idempotent_methods_only() {
    let (legacy, _) = sides().await;
    let site = Site::new(&fallback_config(&legacy));
    let g = site.gateway().await;
    let call = |method: Method, path: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .header("host", "h")
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    // The worker answers: no fallback.
    assert_eq!(send(&g, call(Method::GET, "/api/ok")).await.2, "ok");
    // It traps before answering: a GET is served by the legacy side.
    let (status, _, body) = send(&g, call(Method::GET, "/api/trap")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "legacy"));
    assert_eq!(send(&g, call(Method::PUT, "/api/panic")).await.2, "legacy", "PUT is idempotent");
    // A POST is not tried twice: the worker's failure is the answer.
    let (status, _, body) = send(&g, call(Method::POST, "/api/trap")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(legacy.requests().len(), 2, "the fallbacks, and nothing else, reached legacy");
}

/// Split-table keys that read claims, verified by worker `auth`'s keys (`Signer::hs256()` as
/// `k1`) and policy (issuer `https://id.example`), after `split`.
fn with_claims(split: &str) -> String {
    let jwk = Signer::hs256().jwk(Some("k1")).to_string();
    format!(
        r#"
        jwt = "auth"
        {split}

        [workers.auth]
        module = "builtin:echo-json"

        [workers.auth.jwt]
        issuer = "https://id.example"

        [[workers.auth.jwt.keys]]
        jwk = '{jwk}'
        "#
    )
}

/// A bearer token for `claims` (with the issuer and `exp` in a minute unless given) signed
/// by `signer`.
fn bearer(signer: &Signer, claims: serde_json::Value) -> String {
    let mut all = serde_json::json!({"iss": "https://id.example", "exp": now() + 60});
    all.as_object_mut().unwrap().extend(claims.as_object().unwrap().clone());
    format!("Bearer {}", signer.token(Some("k1"), &all))
}

#[tokio::test]
async fn claim_rules_match_only_a_token_the_worker_would_accept() {
    let sides = sides().await;
    let rules = r#"rules = [
          { claim = "plan", value = "beta", target = "wasm" },
          { claim = "groups", prefix = "canary-", target = "wasm" },
          { claim = "tier", value = "2", target = "wasm" },
        ]"#;
    let site = Site::new(&config(&sides, 0, &with_claims(rules)));
    let g = site.gateway().await;
    let ours = Signer::hs256();
    let on = |claims| {
        let token = bearer(&ours, claims);
        let g = &g;
        async move { side(g, &[("authorization", &token)]).await }
    };
    use serde_json::json;
    assert_eq!(on(json!({"plan": "beta"})).await, "wasm");
    let escaped =
        format!(r#"{{"iss":"https://id.example","exp":{},"plan":"b\u0065ta"}}"#, now() + 60);
    let escaped = format!("Bearer {}", ours.raw_token(r#"{"alg":"HS256","kid":"k1"}"#, &escaped));
    assert_eq!(side(&g, &[("authorization", &escaped)]).await, "wasm", "decoded escapes");
    assert_eq!(
        on(json!({"groups": ["staff", "canary-eu"]})).await,
        "wasm",
        "any string of an array"
    );
    assert_eq!(on(json!({"tier": 2})).await, "wasm", "a number by its JSON text");
    assert_eq!(on(json!({"plan": "free", "groups": ["staff"], "tier": 1})).await, "legacy");
    assert_eq!(side(&g, &[]).await, "legacy", "no token");
    // Tokens the worker would refuse carry no claims.
    let forged = Signer::hmac(edgegate_runtime::keys::Alg::Hs256, &[9; 32]);
    let refused = [
        bearer(&forged, json!({"plan": "beta"})),
        bearer(&ours, json!({"plan": "beta", "exp": now() - 3600})),
        bearer(&ours, json!({"plan": "beta", "iss": "https://evil.example"})),
        format!("Basic {}", &bearer(&ours, json!({"plan": "beta"}))[7..]),
    ];
    for token in &refused {
        assert_eq!(side(&g, &[("authorization", token)]).await, "legacy", "{token}");
    }
    let token = bearer(&ours, json!({"plan": "beta"}));
    let twice = [("authorization", token.as_str()), ("authorization", token.as_str())];
    assert_eq!(side(&g, &twice).await, "legacy", "two Authorization headers");
}

#[tokio::test]
async fn a_claim_sticky_key_keeps_a_user_on_one_side_and_an_unverified_one_is_random() {
    let sides = sides().await;
    let site = Site::new(&config(&sides, 30, &with_claims("sticky = { claim = \"sub\" }")));
    let g = site.gateway().await;
    let ours = Signer::hs256();
    let token = |sub: &str, exp: i64| bearer(&ours, serde_json::json!({"sub": sub, "exp": exp}));
    let mut wasm = 0;
    for i in 0..10_000 {
        let user = user(i);
        let first = side(&g, &[("authorization", &token(&user, now() + 60))]).await;
        if i < 200 {
            // Another token of the same user, or the same token with a forged sub header
            // beside it: the same side.
            let again = side(&g, &[("authorization", &token(&user, now() + 120))]).await;
            assert_eq!(again, first, "{user}");
        }
        wasm += usize::from(first == "wasm");
    }
    let share = wasm as f64 / 10_000.0;
    assert!((share - 0.30).abs() <= 0.02, "{share} on the 30 % side");
    // A forged token for one user: no claims, so a random side per request, both seen.
    let forged = Signer::hmac(edgegate_runtime::keys::Alg::Hs256, &[9; 32]);
    let forged = bearer(&forged, serde_json::json!({"sub": "user-1"}));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        seen.insert(side(&g, &[("authorization", &forged)]).await);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

#[tokio::test]
async fn a_split_reading_claims_needs_a_worker_with_keys() {
    let sides = sides().await;
    let claim_rule = "rules = [{ claim = \"plan\", value = \"beta\", target = \"wasm\" }]";
    for (split, key) in [
        (claim_rule.to_owned(), "routes[0].split.jwt"),
        (format!("jwt = \"nobody\"\n{claim_rule}"), "routes[0].split.jwt"),
        (
            "jwt = \"auth\"\n[workers.auth]\nmodule = \"builtin:echo-json\"".to_owned(),
            "routes[0].split.jwt",
        ),
        ("sticky = { claim = \"sub\", cookie = \"uid\" }".to_owned(), "routes[0].split.sticky"),
    ] {
        let error =
            Loaded::from_text(&config(&sides, 10, &split), "t.toml", PathBuf::new()).unwrap_err();
        assert_eq!(error.key.as_deref(), Some(key), "{split}: {error}");
    }
}
