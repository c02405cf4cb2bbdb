//! Edge auth through the real binary: the demo's tokens and origins, keys from every kind of
//! configured source, and upstreams that are down or hang.

use edgegate_testkit::{HMAC_SECRET, Signer, now};

use crate::cli::check_exact;
use crate::support::{Gateway, Origin, Reply, http, runtime_section};

fn bearer(addr: std::net::SocketAddr, path: &str, token: &str) -> Reply {
    http(addr, "GET", path, &[("Authorization", &format!("Bearer {token}"))], b"")
}

#[test]
fn the_demo_routes_each_audience_to_its_origin() {
    let mut gw = Gateway::demo(&[]);
    let tokens = gw.demo_tokens();
    assert_eq!(tokens.len(), 2);
    for (audience, token) in &tokens {
        let reply = http(
            gw.addr,
            "GET",
            "/auth/orders?id=7",
            &[("Authorization", &format!("Bearer {token}")), ("X-Jwt-Sub", "root")],
            b"",
        );
        assert_eq!(reply.status, 200, "{}", reply.text());
        let origin = reply.json();
        assert_eq!(origin["upstream"], audience.as_str());
        assert_eq!(
            (origin["path"].as_str(), origin["query"].as_str()),
            (Some("/auth/orders"), Some("id=7"))
        );
        let headers = &origin["headers"];
        assert_eq!(headers["x-jwt-sub"], "demo-user", "the verified claim, not the client's");
        assert_eq!(headers["x-jwt-aud"], audience.as_str());
        assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
        assert!(headers.get("authorization").is_none());
    }

    let missing = http(gw.addr, "GET", "/auth/orders", &[], b"");
    assert_eq!((missing.status, missing.header("www-authenticate")), (401, Some("Bearer")));
    assert_eq!(missing.error(), "missing_token");

    // One signature character changed, well before the last (whose low bits must stay zero).
    let mut tampered = tokens[0].1.clone().into_bytes();
    let at = tampered.len() - 10;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let bad = bearer(gw.addr, "/auth/orders", &tampered);
    assert_eq!(
        (bad.status, bad.header("www-authenticate")),
        (401, Some("Bearer error=\"invalid_token\""))
    );
    assert_eq!(bad.error(), "bad_signature");

    let secret = edgegate_host::demo::DEFAULT_SECRET.as_bytes();
    let elsewhere = edgegate_host::demo::token(secret, "service-c", "ada", now() as u64, 60);
    let forbidden = bearer(gw.addr, "/auth/orders", &elsewhere);
    assert_eq!((forbidden.status, forbidden.error().as_str()), (403, "unknown_audience"));

    let (status, stderr) = gw.stop();
    assert!(status.success(), "{stderr}");
    let forwarded: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("edgegate::access") && l.contains("upstream=\"service-"))
        .collect();
    assert_eq!(forwarded.len(), 2, "{stderr}");
}

#[test]
fn the_demo_secret_comes_from_the_environment() {
    let gw = Gateway::demo(&[("EDGEGATE_DEMO_SECRET", "a-secret-of-my-own-of-32-bytes-or-more")]);
    let tokens = gw.demo_tokens();
    assert_eq!(bearer(gw.addr, "/auth/x", &tokens[0].1).status, 200);
    let secret = edgegate_host::demo::DEFAULT_SECRET.as_bytes();
    let with_default = edgegate_host::demo::token(secret, "service-a", "ada", now() as u64, 60);
    assert_eq!(bearer(gw.addr, "/auth/x", &with_default).error(), "bad_signature");
}

/// A config whose auth-router trusts one key from each kind of source and forwards
/// `service-a` to `a` and `service-b` to `b`.
fn auth_config(dir: &std::path::Path, a: &str, b: &str) -> String {
    let secret = dir.join("hs.secret");
    std::fs::write(&secret, [HMAC_SECRET, b"\n"].concat()).unwrap();
    let jwks = dir.join("jwks.json");
    std::fs::write(
        &jwks,
        serde_json::json!({"keys": [Signer::es256().jwk(Some("ec"))]}).to_string(),
    )
    .unwrap();
    let pem = format!("{}/testdata/jose/keys/rfc7515-a2-rsa.spki.pem", env!("CARGO_MANIFEST_DIR"));
    format!(
        r#"
        {runtime}
        [workers.auth]
        module = "builtin:auth-router"
        upstreams = ["service-a", "service-b"]
        config = {{ claim_headers = "sub:x-jwt-sub" }}

        [workers.auth.jwt]
        issuer = "https://id.example"

        [[workers.auth.jwt.keys]]
        kid = "hs"
        alg = "HS256"
        secret_file = {secret:?}

        [[workers.auth.jwt.keys]]
        kid = "rsa"
        alg = "RS256"
        pem_file = {pem:?}

        [[workers.auth.jwt.keys]]
        jwk = '{ed}'

        [[workers.auth.jwt.keys]]
        jwks_file = {jwks:?}

        [[routes]]
        prefix = "/"
        worker = "auth"

        [upstreams.service-a]
        url = "{a}"
        first_byte_timeout = "300ms"

        [upstreams.service-b]
        url = "{b}"
        first_byte_timeout = "300ms"
        "#,
        runtime = runtime_section(),
        secret = secret.display().to_string(),
        jwks = jwks.display().to_string(),
        ed = Signer::eddsa().jwk(Some("ed")),
    )
}

fn claims(aud: &str) -> serde_json::Value {
    serde_json::json!({"iss": "https://id.example", "aud": aud, "sub": "ada", "exp": now() + 60})
}

#[test]
fn tokens_signed_with_configured_keys_reach_a_real_upstream() {
    let origin = Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{}", origin.addr);
    let gw = Gateway::start(&auth_config(dir.path(), &url, &url));
    for (signer, kid) in [
        (Signer::hs256(), "hs"),
        (Signer::rs256(), "rsa"),
        (Signer::eddsa(), "ed"),
        (Signer::es256(), "ec"),
    ] {
        let reply =
            bearer(gw.addr, "/orders?page=2", &signer.token(Some(kid), &claims("service-a")));
        assert_eq!((reply.status, reply.text().as_str()), (200, r#"{"origin":"test"}"#), "{kid}");
    }
    let seen = origin.seen();
    assert_eq!(seen.len(), 4);
    for request in &seen {
        assert_eq!(request.request_line(), "GET /orders?page=2 HTTP/1.1");
        assert_eq!(request.header("x-jwt-sub"), Some("ada"));
        assert_eq!(request.header("authorization"), None);
    }

    let rs = Signer::rs256();
    let expired =
        serde_json::json!({"iss": "https://id.example", "aud": "service-a", "exp": now() - 3600});
    for (token, code) in [
        (rs.token(Some("rsa"), &expired), "token_expired"),
        (Signer::ps256().token(Some("rsa"), &claims("service-a")), "alg_mismatch"),
        (rs.token(Some("nope"), &claims("service-a")), "unknown_kid"),
        (
            rs.token(Some("rsa"), &serde_json::json!({"aud": "service-a", "exp": now() + 60})),
            "bad_issuer",
        ),
        (rs.raw_token(r#"{"alg":"none","kid":"rsa"}"#, "{}"), "alg_none"),
        (rs.raw_token(r#"{"alg":"RS256","kid":"rsa","jku":"http://evil"}"#, "{}"), "embedded_key"),
        (rs.raw_token(r#"{"alg":"RS256","kid":"rsa","crit":["exp"]}"#, "{}"), "crit_unsupported"),
        (format!("{}=", rs.token(Some("rsa"), &claims("service-a"))), "bad_base64"),
        ("x".repeat(9000), "token_too_large"),
    ] {
        let reply = bearer(gw.addr, "/orders", &token);
        assert_eq!((reply.status, reply.error().as_str()), (401, code));
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Bearer error=\"invalid_token\""),
            "{code}"
        );
    }
    assert_eq!(origin.seen().len(), 4, "nothing refused reached the upstream");
}

#[test]
fn an_upstream_that_is_down_is_502_and_one_that_hangs_is_504() {
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let hanging = Origin::hanging();
    let dir = tempfile::tempdir().unwrap();
    let config =
        auth_config(dir.path(), &format!("http://{down}"), &format!("http://{}", hanging.addr));
    let mut gw = Gateway::start(&config);
    let token = |aud: &str| Signer::hs256().token(Some("hs"), &claims(aud));
    let refused = bearer(gw.addr, "/x", &token("service-a"));
    assert_eq!((refused.status, refused.error().as_str()), (502, "upstream_connect_failed"));
    let slow = bearer(gw.addr, "/x", &token("service-b"));
    assert_eq!((slow.status, slow.error().as_str()), (504, "upstream_timeout"));
    assert_eq!(hanging.seen().len(), 1, "it did get the request");
    let (_, stderr) = gw.stop();
    let upstream_lines = stderr.lines().filter(|l| l.contains("source=\"upstream\"")).count();
    assert_eq!(upstream_lines, 2, "{stderr}");
}

#[test]
fn check_reports_a_key_that_cannot_load() {
    let dir = tempfile::tempdir().unwrap();
    let config = auth_config(dir.path(), "http://127.0.0.1:1", "http://127.0.0.1:1")
        .replace("secret_file = ", "secret_env = \"EDGEGATE_TEST_NO_SUCH_VAR\"\n        # ");
    let (code, _, stderr) = check_exact(&config);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("workers.auth.jwt.keys[0].secret_env")
            && stderr.contains("EDGEGATE_TEST_NO_SUCH_VAR"),
        "{stderr}"
    );
}

#[test]
fn a_jwks_default_alg_does_not_hide_a_curve_key_and_a_key_without_one_is_named() {
    let origin = Origin::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{}", origin.addr);
    let config = auth_config(dir.path(), &url, &url);
    // auth_config's set: a P-256 key without `alg`. Beside it, an RSA key without one.
    let mut rsa = Signer::rs256().jwk(Some("rsa2"));
    rsa.as_object_mut().unwrap().remove("alg");
    let set = serde_json::json!({"keys": [Signer::es256().jwk(Some("ec")), rsa]});
    std::fs::write(dir.path().join("jwks.json"), set.to_string()).unwrap();

    let with_default = config.replace("jwks_file = ", "alg = \"RS256\"\n        jwks_file = ");
    let gw = Gateway::start(&with_default);
    for (signer, kid) in [(Signer::es256(), "ec"), (Signer::rs256(), "rsa2")] {
        let reply = bearer(gw.addr, "/x", &signer.token(Some(kid), &claims("service-a")));
        assert_eq!(reply.status, 200, "{kid}: {}", reply.text());
    }

    let (code, _, stderr) = check_exact(&config);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("jwks_file") && stderr.contains("key `rsa2`") && stderr.contains("`alg`"),
        "{stderr}"
    );
}

/// Routes that verify the bearer token in the host before anything serves them: an upstream
/// with no worker, a core module and a component, with a worker's keys and policy or the
/// route's own; the verified claims reach each as headers, never the client's copies.
fn identity_config(origin: std::net::SocketAddr, component: &str) -> String {
    let rsa = serde_json::to_string(&Signer::rs256().jwk(Some("r1"))).unwrap();
    format!(
        r#"
        {runtime}
        [upstreams.origin]
        url = "http://{origin}"

        [workers.auth]
        module = "builtin:auth-router"

        [workers.auth.jwt]
        audiences = ["api"]
        [[workers.auth.jwt.keys]]
        kid = "h1"
        alg = "HS256"
        secret_env = "IDENTITY_TEST_SECRET"
        [[workers.auth.jwt.keys]]
        jwk = {rsa:?}

        [workers.hostile]
        module = "{hostile}"
        upstreams = ["origin"]

        [workers.std]
        module = "{component}"
        limits = {{ cpu = "500ms" }}

        [[routes]]
        name = "api"
        prefix = "/api/"
        upstream = "origin"
        [routes.identity]
        worker = "auth"
        claims = {{ sub = "x-jwt-sub", plan = "x-jwt-plan" }}

        [[routes]]
        name = "module"
        path = "/pass"
        worker = "hostile"
        [routes.identity]
        worker = "auth"
        claims = {{ sub = "x-jwt-sub" }}

        [[routes]]
        name = "component"
        prefix = "/header/"
        worker = "std"
        [routes.identity]
        claims = {{ sub = "x-jwt-sub", roles = "x-jwt-roles" }}
        [routes.identity.jwt]
        issuer = "https://issuer.test"
        [[routes.identity.jwt.keys]]
        alg = "HS256"
        secret_env = "IDENTITY_TEST_SECRET"
        "#,
        runtime = runtime_section(),
        hostile = edgegate_guests::HOSTILE,
    )
}

#[test]
fn a_route_verifies_the_bearer_token_and_passes_its_claims_as_headers() {
    let Some(component) = edgegate_guests::wasip2_std() else { return };
    let origin = Origin::start();
    let config = identity_config(origin.addr, component);
    let secret = std::str::from_utf8(HMAC_SECRET).unwrap();
    let env = [("IDENTITY_TEST_SECRET", secret)];
    let mut gw = Gateway::start_with(&config, &[], &env);
    let hs = Signer::hs256();
    let exp = now() + 60;
    let ada = hs.token(Some("h1"), &serde_json::json!({"sub": "ada", "aud": "api", "exp": exp}));
    let get = |path: &str, headers: &[(&str, &str)]| http(gw.addr, "GET", path, headers, b"");
    let with = |token: &str| format!("Bearer {token}");

    // An upstream with no worker: the claim replaces the client's copy; an absent claim's
    // header is removed, not passed on.
    let auth = with(&ada);
    let reply =
        get("/api/x", &[("authorization", &auth), ("x-jwt-sub", "root"), ("X-Jwt-Plan", "gold")]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let seen = origin.seen().pop().unwrap();
    assert_eq!(seen.header("x-jwt-sub"), Some("ada"));
    assert_eq!(seen.header("x-jwt-plan"), None, "{}", seen.head);
    // A core module: what it forwards carries the verified claim.
    let reply = get("/pass", &[("authorization", &auth), ("x-jwt-sub", "root")]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(origin.seen().pop().unwrap().header("x-jwt-sub"), Some("ada"));
    // A component, with the route's own keys and policy (an issuer): a string claim as its
    // text, an array's strings joined with `,` (as auth-router's claim headers are).
    let claims = serde_json::json!({"sub": "bo", "roles": ["a", "b"], "iss": "https://issuer.test", "exp": exp});
    let bo = with(&hs.token(None, &claims));
    assert_eq!(get("/header/x-jwt-sub", &[("authorization", &bo)]).text(), "bo");
    assert_eq!(get("/header/x-jwt-roles", &[("authorization", &bo)]).text(), "a,b");
    let no_issuer = with(&hs.token(None, &serde_json::json!({"sub": "bo", "exp": exp})));
    assert_eq!(get("/header/x-jwt-sub", &[("authorization", &no_issuer)]).error(), "invalid_token");
    let seen_before = origin.seen().len();

    // The attacks auth-router is tested against, on the upstream route.
    let missing = get("/api/x", &[("x-jwt-sub", "root")]);
    assert_eq!((missing.status, missing.header("www-authenticate")), (401, Some("Bearer")));
    assert_eq!(missing.error(), "missing_token");
    assert_eq!(missing.header("cache-control"), Some("no-store"));
    let other = Signer::hmac(edgegate_runtime::keys::Alg::Hs256, &[1; 32]);
    let claims = serde_json::json!({"sub": "ada", "aud": "api", "exp": exp});
    let unsigned = format!(
        "{}.{}.",
        edgegate_testkit::b64(br#"{"alg":"none","typ":"JWT"}"#),
        edgegate_testkit::b64(claims.to_string().as_bytes())
    );
    // An HS256 token "signed" with the RSA key's public JWK, naming the RSA key: the key
    // decides the algorithm, never the token.
    let confused = Signer::hmac(edgegate_runtime::keys::Alg::Hs256, rsa_public_bytes().as_bytes());
    let attacks = [
        ("forged", other.token(Some("h1"), &claims)),
        ("alg none", unsigned),
        (
            "expired",
            hs.token(
                Some("h1"),
                &serde_json::json!({"sub": "ada", "aud": "api", "exp": now() - 3600}),
            ),
        ),
        (
            "wrong audience",
            hs.token(Some("h1"), &serde_json::json!({"sub": "ada", "aud": "web", "exp": exp})),
        ),
        ("unknown kid", hs.token(Some("h9"), &claims)),
        ("kid with a path", hs.token(Some("../../h1"), &claims)),
        ("kid of the RSA key", confused.token(Some("r1"), &claims)),
        (
            "duplicate claim",
            hs.raw_token(
                r#"{"alg":"HS256","kid":"h1"}"#,
                &format!(r#"{{"sub":"ada","sub":"root","aud":"api","exp":{exp}}}"#),
            ),
        ),
        (
            "duplicate header key",
            hs.raw_token(r#"{"alg":"HS256","alg":"none","kid":"h1"}"#, &claims.to_string()),
        ),
        ("no exp", hs.token(Some("h1"), &serde_json::json!({"sub": "ada", "aud": "api"}))),
    ];
    for (attack, token) in &attacks {
        let reply = get("/api/x", &[("authorization", &with(token)), ("x-jwt-sub", "root")]);
        assert_eq!(
            (reply.status, reply.header("www-authenticate"), reply.error().as_str()),
            (401, Some("Bearer error=\"invalid_token\""), "invalid_token"),
            "{attack}"
        );
    }
    assert_eq!(origin.seen().len(), seen_before, "nothing refused reached the upstream");
    let outcomes = |route: &str, outcome: &str| {
        crate::support::counter(
            &gw,
            &format!("edgegate_route_identity_total{{route=\"{route}\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(outcomes("api", "verified"), 1);
    assert_eq!(outcomes("api", "missing"), 1);
    assert_eq!(outcomes("api", "invalid"), attacks.len() as u64);
    assert_eq!(outcomes("component", "invalid"), 1);

    let (_, log) = gw.stop();
    assert!(log.contains(r#"error="invalid_token""#), "{log}");
    assert!(log.contains("the bearer token: bad_signature"), "{log}");
    assert!(log.contains("the bearer token: alg_none"), "{log}");
}

/// The RFC 7515 A.2 RSA key's public JWK as text, what a confused verifier might take for an
/// HMAC secret.
fn rsa_public_bytes() -> String {
    serde_json::to_string(&Signer::rs256().jwk(Some("r1"))).unwrap()
}
