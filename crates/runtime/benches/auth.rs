//! JWT verification, three ways, on the same tokens (signed with the RFC 7515 / RFC 8037 keys):
//!
//! * `verify-native/ALG`: `ring` alone, called directly, the key already parsed: the ceiling.
//! * `host-path/ALG`: a guest (the hostile test program's `/verify`) takes the token apart and
//!   asks the host through `jws_verify`, in a fresh instance; `host-path/baseline` is the same
//!   request to `/ok`, so `host-path/ALG − host-path/baseline` is what verifying through the
//!   host costs, to compare with `verify-native/ALG`.
//! * `auth-router/ALG`: the whole gateway worker: instantiate, read the policy, verify the
//!   token through the host, check the claims, route on `aud`, build the forward directive.
//!   `auth-router/HS256 − echo-json/isolation` is what HS256 auth adds to a request.
//!
//! Run: `cargo bench -p edgegate-runtime --bench auth`

use std::collections::BTreeMap;

use criterion::{Criterion, criterion_group, criterion_main};
use edgegate_runtime::keys::{Alg, Key, KeySet};
use edgegate_runtime::{
    GuestOutcome, GuestRequest, Keys, Limits, RequestId, Runtime, RuntimeConfig, Worker, WorkerSpec,
};
use edgegate_testkit::{Signer, now};
use ring::signature::{self, UnparsedPublicKey};

fn load(runtime: &Runtime, wasm: &[u8], keys: &Keys, config: &[(&str, &str)]) -> Worker {
    runtime
        .load(WorkerSpec {
            name: "bench",
            wasm,
            // Not testing the budget: on a VM, stolen time is now and then charged to the
            // thread running the guest (seen here: a few ms once in a million requests).
            limits: Limits { cpu: std::time::Duration::from_secs(1), ..Limits::default() },
            config: config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            keys: Some(keys.clone()),
        })
        .unwrap()
}

fn b64d(text: &str) -> Vec<u8> {
    <base64ct::Base64UrlUnpadded as base64ct::Encoding>::decode_vec(text).unwrap()
}

fn signers() -> Vec<Signer> {
    vec![Signer::hs256(), Signer::rs256(), Signer::es256(), Signer::eddsa()]
}

fn token(signer: &Signer) -> String {
    let claims = serde_json::json!({"sub": "ada", "aud": "service-a", "scope": "read", "exp": now() + 3600, "iat": now()});
    signer.token(Some(signer.alg().name()), &claims)
}

/// ring's own verify for `signer`'s algorithm, with the key parsed the way ring takes it.
fn native(signer: &Signer) -> impl Fn(&[u8], &[u8]) -> bool {
    let jwk = signer.jwk(None);
    let decode = |name: &str| b64d(jwk[name].as_str().unwrap());
    let alg = signer.alg();
    let (hmac, n, e, point, ed) = match alg {
        Alg::Hs256 => (
            Some(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &decode("k"))),
            vec![],
            vec![],
            vec![],
            vec![],
        ),
        Alg::Rs256 => (None, decode("n"), decode("e"), vec![], vec![]),
        Alg::Es256 => {
            (None, vec![], vec![], [&[4u8][..], &decode("x"), &decode("y")].concat(), vec![])
        }
        _ => (None, vec![], vec![], vec![], decode("x")),
    };
    move |input: &[u8], sig: &[u8]| match alg {
        Alg::Hs256 => ring::hmac::verify(hmac.as_ref().unwrap(), input, sig).is_ok(),
        Alg::Rs256 => signature::RsaPublicKeyComponents { n: &n, e: &e }
            .verify(&signature::RSA_PKCS1_2048_8192_SHA256, input, sig)
            .is_ok(),
        Alg::Es256 => UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &point)
            .verify(input, sig)
            .is_ok(),
        _ => UnparsedPublicKey::new(&signature::ED25519, &ed).verify(input, sig).is_ok(),
    }
}

fn bench(c: &mut Criterion) {
    let runtime =
        Runtime::new(RuntimeConfig { max_instances: 16, ..RuntimeConfig::default() }, None)
            .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let keys = Keys::new(KeySet::new(
        signers()
            .iter()
            .map(|s| Key::from_jwk(&s.jwk(Some(s.alg().name())), Some(s.alg()), None).unwrap())
            .collect(),
    ));

    let mut group = c.benchmark_group("verify-native");
    for signer in signers() {
        let token = token(&signer);
        let (input, sig) = token.rsplit_once('.').unwrap();
        let sig = b64d(sig);
        let verify = native(&signer);
        assert!(verify(input.as_bytes(), &sig));
        group.bench_function(signer.alg().name(), |b| b.iter(|| verify(input.as_bytes(), &sig)));
    }
    group.finish();

    let hostile = load(&runtime, &std::fs::read(edgegate_guests::HOSTILE).unwrap(), &keys, &[]);
    let respond = |worker: &Worker, request: &GuestRequest| match rt
        .block_on(worker.handle(request.clone(), RequestId(1)))
    {
        Ok(GuestOutcome::Response(r)) => (r.status().as_u16(), r.into_body()),
        other => panic!("{other:?}"),
    };
    let mut group = c.benchmark_group("host-path");
    let sample = token(&Signer::rs256());
    let baseline = GuestRequest {
        uri: "/ok".parse().unwrap(),
        body: sample.clone().into(),
        ..GuestRequest::default()
    };
    assert_eq!(respond(&hostile, &baseline).0, 200);
    group.bench_function("baseline", |b| b.iter(|| respond(&hostile, &baseline)));
    for signer in signers() {
        let request = GuestRequest {
            uri: "/verify".parse().unwrap(),
            body: token(&signer).into(),
            ..GuestRequest::default()
        };
        assert_eq!(respond(&hostile, &request), (200, "verified".into()), "{}", signer.alg());
        group.bench_function(signer.alg().name(), |b| b.iter(|| respond(&hostile, &request)));
    }
    group.finish();

    let echo = load(&runtime, edgegate_guests::ECHO_JSON, &keys, &[]);
    let get = GuestRequest { uri: "/echo".parse().unwrap(), ..GuestRequest::default() };
    assert_eq!(respond(&echo, &get).0, 405);
    c.benchmark_group("echo-json").bench_function("isolation", |b| b.iter(|| respond(&echo, &get)));

    let config = [("claim_headers", "sub:x-jwt-sub,scope:x-jwt-scope")];
    let router = load(&runtime, edgegate_guests::AUTH_ROUTER, &keys, &config);
    let forward =
        |request: &GuestRequest| match rt.block_on(router.handle(request.clone(), RequestId(1))) {
            Ok(GuestOutcome::Forward(f)) => f.upstream,
            other => panic!("{other:?}"),
        };
    let mut group = c.benchmark_group("auth-router");
    for signer in signers() {
        let mut request =
            GuestRequest { uri: "/auth/orders".parse().unwrap(), ..GuestRequest::default() };
        request
            .headers
            .insert("authorization", format!("Bearer {}", token(&signer)).parse().unwrap());
        request.headers.insert("host", "api.example".parse().unwrap());
        assert_eq!(forward(&request), "service-a");
        group.bench_function(signer.alg().name(), |b| b.iter(|| forward(&request)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
