//! The auth-router worker through the real runtime, both ways it verifies tokens: whole in the
//! host (`jwt_claims`), and taken apart in the guest with signatures checked by `jws_verify`
//! with the host's `ring`. Every case runs both, and both must answer alike.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use edgegate_testkit::{Signer, now};
use serde_json::json;

use super::*;
use crate::capability::keys::{Key, KeySet};

/// The claim headers the tests ask for.
const CLAIM_HEADERS: &str = "sub:x-jwt-sub,scope:x-jwt-scope";

/// auth-router loaded twice: verifying tokens in the guest (its default; the host checks only
/// signatures) and in the host (`verify_in = "host"`, through `jwt_claims`).
struct Paths {
    host: Worker,
    guest: Worker,
}

fn auth_router(runtime: &Runtime, keys: Option<Keys>, config: &[(&str, &str)]) -> Paths {
    let load = |verify_in: &str| {
        let mut map: BTreeMap<String, String> =
            [("claim_headers", CLAIM_HEADERS), ("verify_in", verify_in)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        map.extend(config.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        runtime
            .load(WorkerSpec {
                name: "auth",
                source: crate::Source::Bytes(bytes::Bytes::copy_from_slice(guests::AUTH_ROUTER)),
                native_code: false,
                limits: Limits::default(),
                config: map,
                keys: keys.clone(),
                kv: Vec::new(),
                fetcher: None,
                image: None,
            })
            .unwrap()
    };
    Paths { host: load("host"), guest: load("guest") }
}

/// Keys for every signer, each under its algorithm's name as kid.
fn all_keys() -> Keys {
    let keys = Signer::all()
        .iter()
        .map(|s| Key::from_jwk(&s.jwk(Some(s.alg().name())), Some(s.alg()), None).unwrap())
        .collect();
    Keys::new(KeySet::new(keys))
}

/// The hostile test guest, granted every signer's key.
fn hostile_with_keys() -> Worker {
    let wasm = std::fs::read(guests::HOSTILE).unwrap();
    runtime()
        .load(WorkerSpec { keys: Some(all_keys()), ..spec(&wasm, Limits::default(), &[]) })
        .unwrap()
}

fn with_token(token: &str) -> GuestRequest {
    let mut request = get("/auth/orders?id=7");
    request.headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

/// What the worker answered: a forward (upstream, edits) or a response (status, body). Both
/// paths must answer alike, or the test fails.
async fn outcome(paths: &Paths, request: GuestRequest) -> Result<Forward, (u16, String)> {
    let host = one_outcome(&paths.host, request.clone()).await;
    let guest = one_outcome(&paths.guest, request).await;
    let decision = |o: &Result<Forward, (u16, String)>| {
        o.as_ref().map(|f| (f.upstream.clone(), f.edits.clone())).map_err(Clone::clone)
    };
    assert_eq!(decision(&host), decision(&guest), "the host's and the guest's verification differ");
    host
}

async fn one_outcome(worker: &Worker, request: GuestRequest) -> Result<Forward, (u16, String)> {
    match worker.handle(request, RequestId(1)).await {
        Ok(GuestOutcome::Forward(forward)) => Ok(forward),
        Ok(GuestOutcome::Response(r)) => {
            Err((r.status().as_u16(), String::from_utf8_lossy(r.body()).into_owned()))
        }
        Ok(GuestOutcome::Streamed(..)) => panic!("a module's answer is never streamed"),
        Err(e) => Err((0, e.kind().code().to_owned())),
    }
}

fn good_claims() -> serde_json::Value {
    json!({"sub": "ada", "aud": "service-a", "scope": "read write", "exp": now() + 300, "iat": now()})
}

#[tokio::test]
async fn every_algorithm_is_verified_by_the_host_and_forwarded() {
    let worker = auth_router(runtime(), Some(all_keys()), &[]);
    for signer in Signer::all() {
        let token = signer.token(Some(signer.alg().name()), &good_claims());
        let forward = outcome(&worker, with_token(&token))
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", signer.alg()));
        assert_eq!(forward.upstream, "service-a");
        assert_eq!(
            forward.edits,
            [
                HeaderEdit::Set("x-jwt-sub".parse().unwrap(), "ada".parse().unwrap()),
                HeaderEdit::Set("x-jwt-scope".parse().unwrap(), "read write".parse().unwrap()),
                HeaderEdit::Remove("authorization".parse().unwrap()),
            ],
            "{}",
            signer.alg()
        );
    }
}

#[tokio::test]
async fn the_route_comes_from_the_audience() {
    let worker = auth_router(runtime(), Some(all_keys()), &[]);
    let hs = Signer::hs256();
    let token =
        |aud: serde_json::Value| hs.token(Some("HS256"), &json!({"aud": aud, "exp": now() + 60}));
    let upstream = |f: Result<Forward, (u16, String)>| f.map(|f| f.upstream);
    assert_eq!(
        upstream(outcome(&worker, with_token(&token(json!("service-b")))).await),
        Ok("service-b".into())
    );
    assert_eq!(
        upstream(
            outcome(&worker, with_token(&token(json!(["nope", "service-b", "service-a"])))).await
        ),
        Ok("service-b".into()),
        "the first audience with a route"
    );
    assert_eq!(
        outcome(&worker, with_token(&token(json!("service-c")))).await.unwrap_err(),
        (403, r#"{"error":"unknown_audience"}"#.into())
    );
    // A missing claim removes a header the client sent itself.
    let forward = outcome(&worker, with_token(&token(json!("service-a")))).await.unwrap();
    assert!(forward.edits.contains(&HeaderEdit::Remove("x-jwt-sub".parse().unwrap())));
}

#[tokio::test]
async fn refusals_are_401_with_their_code() {
    let worker = auth_router(runtime(), Some(all_keys()), &[]);
    let (es, ed, hs) = (Signer::es256(), Signer::eddsa(), Signer::hs256());
    let mut tampered = hs.token(Some("HS256"), &good_claims());
    tampered.truncate(tampered.len() - 2);
    tampered.push_str("AA");
    let expired = hs.token(Some("HS256"), &json!({"aud": "service-a", "exp": now() - 3600}));
    let exp = format!(r#"{{"aud":"service-a","exp":{}}}"#, now() + 60);
    let dup_aud = format!(r#"{{"aud":"service-a","aud":"service-b","exp":{}}}"#, now() + 60);
    for (token, code) in [
        (es.token(Some("EdDSA"), &good_claims()), "alg_mismatch"),
        (es.token(Some("ES384"), &good_claims()), "unknown_kid"),
        (es.token(None, &good_claims()), "unknown_kid"),
        (tampered, "bad_signature"),
        (expired, "token_expired"),
        (ed.raw_token(r#"{"alg":"none"}"#, r#"{"aud":"service-a"}"#), "alg_none"),
        (ed.raw_token(r#"{"alg":"None","kid":"EdDSA"}"#, &exp), "alg_none"),
        (hs.raw_token(r#"{"alg":"HS256","kid":"ES256"}"#, &exp), "alg_mismatch"),
        (hs.raw_token(r#"{"alg":"HS256","kid":"../HS256"}"#, &exp), "unknown_kid"),
        (
            hs.raw_token(&format!(r#"{{"alg":"HS256","kid":"{}"}}"#, "k".repeat(300)), &exp),
            "unknown_kid",
        ),
        (hs.raw_token(r#"{"alg":"HS256","kid":"HS256","kid":"ES256"}"#, &exp), "duplicate_key"),
        (hs.raw_token(r#"{"alg":"HS256","kid":"HS256"}"#, &dup_aud), "duplicate_key"),
        (hs.raw_token(r#"{"alg":"HS256","kid":"HS256","jwk":{}}"#, &exp), "embedded_key"),
        (hs.raw_token(r#"{"alg":"HS256","kid":"HS256","crit":["x"]}"#, &exp), "crit_unsupported"),
        (format!("{}.", hs.token(Some("HS256"), &good_claims())), "malformed_token"),
    ] {
        let (status, body) = outcome(&worker, with_token(&token)).await.unwrap_err();
        assert_eq!((status, body), (401, format!(r#"{{"error":"{code}"}}"#)));
    }
    let (status, body) = outcome(&worker, get("/auth/x")).await.unwrap_err();
    assert_eq!((status, body.as_str()), (401, r#"{"error":"missing_token"}"#));
}

#[tokio::test]
async fn the_policy_comes_from_the_jwt_config_keys() {
    let worker = auth_router(
        runtime(),
        Some(all_keys()),
        &[
            ("jwt.issuer", "https://id.example"),
            ("jwt.required", "sub,exp"),
            ("jwt.max_token", "600"),
        ],
    );
    let hs = Signer::hs256();
    let claims = |extra: serde_json::Value| {
        let mut c = json!({"aud": "service-a", "exp": now() + 60, "sub": "ada", "iss": "https://id.example"});
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        c
    };
    assert!(
        outcome(&worker, with_token(&hs.token(Some("HS256"), &claims(json!({}))))).await.is_ok()
    );
    let (_, body) =
        outcome(&worker, with_token(&hs.token(Some("HS256"), &claims(json!({"iss": "other"})))))
            .await
            .unwrap_err();
    assert_eq!(body, r#"{"error":"bad_issuer"}"#);
    let mut no_sub = claims(json!({}));
    no_sub.as_object_mut().unwrap().remove("sub");
    let (_, body) =
        outcome(&worker, with_token(&hs.token(Some("HS256"), &no_sub))).await.unwrap_err();
    assert_eq!(body, r#"{"error":"missing_claim"}"#);
    let big = claims(json!({"pad": "x".repeat(600)}));
    let (_, body) = outcome(&worker, with_token(&hs.token(Some("HS256"), &big))).await.unwrap_err();
    assert_eq!(body, r#"{"error":"token_too_large"}"#);
}

#[tokio::test]
async fn keys_that_are_missing_or_unavailable_are_not_the_clients_fault() {
    let token = Signer::hs256().token(Some("HS256"), &good_claims());
    let none = auth_router(runtime(), None, &[]);
    assert_eq!(outcome(&none, with_token(&token)).await.unwrap_err().1, "worker_error");
    let waiting =
        auth_router(runtime(), Some(Keys::new(KeySet::default().with_incomplete(true))), &[]);
    assert_eq!(outcome(&waiting, with_token(&token)).await.unwrap_err().1, "worker_unavailable");
}

#[tokio::test]
async fn a_key_set_swapped_under_a_running_worker_takes_effect_at_once() {
    let keys = Keys::new(KeySet::default());
    let worker = auth_router(runtime(), Some(keys.clone()), &[]);
    let token = Signer::es256().token(Some("rotated"), &good_claims());
    assert_eq!(outcome(&worker, with_token(&token)).await.unwrap_err().0, 401);
    let jwk = Signer::es256().jwk(Some("rotated"));
    keys.store(KeySet::new(vec![Key::from_jwk(&jwk, None, None).unwrap()]));
    assert!(outcome(&worker, with_token(&token)).await.is_ok());
}

/// 2011-03-22, an hour before the RFC 7515 example tokens expire.
fn march_2011() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_300_819_380 - 3600)
}

#[tokio::test]
async fn the_rfc7515_examples_verify_through_the_host_at_a_pinned_clock() {
    let pinned = Runtime::new(
        RuntimeConfig { max_instances: 4, wall_clock: march_2011, ..RuntimeConfig::default() },
        None,
    )
    .unwrap();
    let doc: serde_json::Value = serde_json::from_str(edgegate_testkit::VECTORS).unwrap();
    let mut checked = 0;
    for v in doc["vectors"].as_array().unwrap().iter().filter(|v| v["claims"] == true) {
        let alg = crate::capability::keys::Alg::from_name(v["alg"].as_str().unwrap()).unwrap();
        let key = Key::from_jwk(&v["jwk"], Some(alg), None).unwrap();
        let keys = Keys::new(KeySet::new(vec![key]));
        let token = v["token"].as_str().unwrap();
        // Verified, claims and all: refused only because "joe" names no audience we route.
        let worker = auth_router(&pinned, Some(keys.clone()), &[("jwt.issuer", "joe")]);
        assert_eq!(
            outcome(&worker, with_token(token)).await.unwrap_err(),
            (403, r#"{"error":"unknown_audience"}"#.into())
        );
        // The same token today is long expired.
        let today = auth_router(runtime(), Some(keys), &[("jwt.issuer", "joe")]);
        assert_eq!(
            outcome(&today, with_token(token)).await.unwrap_err().1,
            r#"{"error":"token_expired"}"#
        );
        checked += 1;
    }
    assert_eq!(checked, 3);
}

#[tokio::test]
async fn hostile_arguments_to_jws_verify_get_error_codes() {
    let worker = hostile_with_keys();
    let r = response(&worker, get("/jws-abuse")).await;
    // InvalidArgument, LimitExceeded, InvalidArgument, InvalidArgument.
    assert_eq!(r.body(), "-2 -3 -2 -2");
    let mut verify = get("/verify");
    verify.body = Signer::rs256().token(Some("RS256"), &good_claims()).into();
    assert_eq!(response(&worker, verify).await.body(), "verified");
    still_serves(&worker).await;
}

#[tokio::test]
async fn ecdsa_signatures_out_of_range_are_refused_by_the_host() {
    let worker = auth_router(runtime(), Some(all_keys()), &[]);
    let token = Signer::es256().token(Some("ES256"), &good_claims());
    let (input, sig) = token.rsplit_once('.').unwrap();
    let sig = edgegate_testkit::b64d(sig);
    // The order n of P-256.
    let n = edgegate_testkit::b64d("_____wAAAAD__________7zm-q2nF56E87nKwvxjJVE");
    let (r, s) = sig.split_at(32);
    for bad in [
        [&[0u8; 32][..], s].concat(),
        [r, &[0u8; 32]].concat(),
        [&n[..], s].concat(),
        [r, &n[..]].concat(),
        sig[..63].to_vec(),
    ] {
        let token = format!("{input}.{}", edgegate_testkit::b64(&bad));
        let (status, body) = outcome(&worker, with_token(&token)).await.unwrap_err();
        assert_eq!((status, body.as_str()), (401, r#"{"error":"bad_signature"}"#));
    }
}

#[tokio::test]
async fn authorization_is_forwarded_only_when_configured() {
    let keep = auth_router(runtime(), Some(all_keys()), &[("forward_authorization", "true")]);
    let token = Signer::hs256().token(Some("HS256"), &good_claims());
    let forward = outcome(&keep, with_token(&token)).await.unwrap();
    assert!(
        !forward.edits.iter().any(|e| matches!(e, HeaderEdit::Remove(n) if n == "authorization"))
    );
    assert!(forward.request.headers.contains_key("authorization"), "the request still carries it");
}

#[tokio::test]
async fn hostile_arguments_to_jwt_claims_get_error_codes() {
    let worker = hostile_with_keys();
    let claims = json!({"sub": "ada", "aud": "service-a", "exp": now() + 60});
    let token = Signer::hs256().token(Some("HS256"), &claims);
    let answer = r#"{"sub":"ada"}"#;
    let len = answer.len() + 1;
    let mut request = get("/claims-abuse");
    request.headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    let r = response(&worker, request).await;
    // InvalidArgument, LimitExceeded, InvalidArgument twice, InvalidArgument; then the
    // answer's length into 1 byte (kept), and the kept answer itself.
    assert_eq!(r.body(), &format!("-2 -3 -2 -2 -2 {len} {len} {answer}")[..]);
    // No token is the SDK's `missing_token` refusal, numbered from the ABI's base.
    let missing =
        edgegate_abi::jws::REFUSED - edgegate_sdk::jwt::Error::MissingToken.number() as i32;
    let r = response(&worker, get("/claims-abuse")).await;
    assert_eq!(r.body(), &format!("-2 -3 -2 -2 {missing} {missing} {missing} ")[..]);
    still_serves(&worker).await;
}
