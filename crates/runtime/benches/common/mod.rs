//! What the auth benches measure, set up once: the tokens, ring's own verify, and the
//! requests through the runtime. `auth.rs` times them with criterion; `auth_ratios.rs` times
//! them interleaved, for ratios that survive a noisy machine.

use std::collections::BTreeMap;

use edgegate_runtime::keys::{Alg, Key, KeySet};
use edgegate_runtime::{
    GuestOutcome, GuestRequest, Keys, Limits, RequestId, Runtime, RuntimeConfig, Worker, WorkerSpec,
};
use edgegate_testkit::{Signer, now};
use ring::signature::{self, UnparsedPublicKey};

/// Everything the benches run.
pub struct Setup {
    pub rt: tokio::runtime::Runtime,
    pub signers: Vec<Signer>,
    hostile: Worker,
    echo: Worker,
    router: Worker,
    router_in_host: Worker,
    keys: Keys,
    _runtime: Runtime,
}

fn b64d(text: &str) -> Vec<u8> {
    <base64ct::Base64UrlUnpadded as base64ct::Encoding>::decode_vec(text).unwrap()
}

/// A token for `signer`, with the claims auth-router routes on.
pub fn token(signer: &Signer) -> String {
    let claims = serde_json::json!({
        "sub": "ada", "aud": "service-a", "scope": "read", "exp": now() + 3600, "iat": now()
    });
    signer.token(Some(signer.alg().name()), &claims)
}

/// A signature check: `(signing input, signature) -> valid`.
pub type Verify = Box<dyn Fn(&[u8], &[u8]) -> bool>;

/// ring's own verify for `signer`'s algorithm, the key parsed the way ring takes it: the
/// ceiling for the host path.
pub fn native(signer: &Signer) -> Verify {
    let jwk = signer.jwk(None);
    let part = |name: &str| b64d(jwk[name].as_str().unwrap());
    match signer.alg() {
        Alg::Hs256 => {
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &part("k"));
            Box::new(move |input, sig| ring::hmac::verify(&key, input, sig).is_ok())
        }
        Alg::Rs256 => {
            let (n, e) = (part("n"), part("e"));
            Box::new(move |input, sig| {
                signature::RsaPublicKeyComponents { n: &n, e: &e }
                    .verify(&signature::RSA_PKCS1_2048_8192_SHA256, input, sig)
                    .is_ok()
            })
        }
        Alg::Es256 => {
            let point = [&[4u8][..], &part("x"), &part("y")].concat();
            Box::new(move |input, sig| {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &point)
                    .verify(input, sig)
                    .is_ok()
            })
        }
        _ => {
            let x = part("x");
            Box::new(move |input, sig| {
                UnparsedPublicKey::new(&signature::ED25519, &x).verify(input, sig).is_ok()
            })
        }
    }
}

/// `token`'s signing input and decoded signature.
pub fn split(token: &str) -> (Vec<u8>, Vec<u8>) {
    let (input, sig) = token.rsplit_once('.').unwrap();
    (input.as_bytes().to_vec(), b64d(sig))
}

impl Setup {
    pub fn new() -> Self {
        let runtime =
            Runtime::new(RuntimeConfig { max_instances: 16, ..RuntimeConfig::default() }, None)
                .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let signers = vec![Signer::hs256(), Signer::rs256(), Signer::es256(), Signer::eddsa()];
        let keys = Keys::new(KeySet::new(
            signers
                .iter()
                .map(|s| Key::from_jwk(&s.jwk(Some(s.alg().name())), Some(s.alg()), None).unwrap())
                .collect(),
        ));
        let load = |wasm: &[u8], config: &[(&str, &str)]| {
            runtime
                .load(WorkerSpec {
                    name: "bench",
                    source: edgegate_runtime::Source::Bytes(bytes::Bytes::copy_from_slice(wasm)),
                    native_code: false,
                    // Not testing the budget: on a VM, stolen time is now and then charged to
                    // the thread running the guest (seen here: a few ms once in a million).
                    limits: Limits { cpu: std::time::Duration::from_secs(1), ..Limits::default() },
                    config: config
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                    keys: Some(keys.clone()),
                    kv: Vec::new(),
                    fetcher: None,
                    image: None,
                })
                .unwrap()
        };
        let hostile = load(&std::fs::read(edgegate_guests::HOSTILE).unwrap(), &[]);
        let echo = load(edgegate_guests::ECHO_JSON, &[]);
        let router = |verify_in| {
            let claims = ("claim_headers", "sub:x-jwt-sub,scope:x-jwt-scope");
            load(edgegate_guests::AUTH_ROUTER, &[claims, ("verify_in", verify_in)])
        };
        let (router, router_in_host) = (router("guest"), router("host"));
        Self { rt, signers, hostile, echo, router, router_in_host, keys, _runtime: runtime }
    }

    fn respond(&self, worker: &Worker, request: &GuestRequest) -> (u16, bytes::Bytes) {
        match self.rt.block_on(worker.handle(request.clone(), RequestId(1))) {
            Ok(GuestOutcome::Response(r)) => (r.status().as_u16(), r.into_body()),
            other => panic!("{other:?}"),
        }
    }

    /// The hostile guest's `/ok` with `token` as its body: a fresh instance, the request
    /// copied in, no verification.
    pub fn baseline(&self, token: &str) -> impl Fn() + '_ {
        let request = GuestRequest {
            uri: "/ok".parse().unwrap(),
            body: token.to_owned().into(),
            ..GuestRequest::default()
        };
        assert_eq!(self.respond(&self.hostile, &request).0, 200);
        move || assert_eq!(self.respond(&self.hostile, &request).0, 200)
    }

    /// The hostile guest's `/verify`: the same, and the token checked through `jws_verify`.
    pub fn host_path(&self, token: &str) -> impl Fn() + '_ {
        let request = GuestRequest {
            uri: "/verify".parse().unwrap(),
            body: token.to_owned().into(),
            ..GuestRequest::default()
        };
        assert_eq!(self.respond(&self.hostile, &request), (200, "verified".into()));
        move || assert_eq!(self.respond(&self.hostile, &request).0, 200)
    }

    /// `token` verified whole, natively, as `jwt_claims` does it: the bearer header found, the
    /// SDK's `jwt::verify` over the worker's key set, no guest.
    pub fn whole_in_host(&self, token: &str) -> impl Fn() + '_ {
        let mut headers = http::HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        let policy = edgegate_sdk::jwt::Validation::default();
        let now = std::time::SystemTime::now();
        move || {
            edgegate_runtime::token::verify(&headers, &self.keys, &policy, now).unwrap();
        }
    }

    /// echo-json answering a GET with 405 at once: isolation alone.
    pub fn echo_isolation(&self) -> impl Fn() + '_ {
        let request = GuestRequest { uri: "/echo".parse().unwrap(), ..GuestRequest::default() };
        assert_eq!(self.respond(&self.echo, &request).0, 405);
        move || assert_eq!(self.respond(&self.echo, &request).0, 405)
    }

    /// The whole auth-router request for `token`, to its forward directive: the token taken
    /// apart in the guest with only the signature checked by the host (auth-router's default)
    /// or, `in_host`, verified whole by the host's `jwt_claims`.
    pub fn auth_router(&self, token: &str, in_host: bool) -> impl Fn() + '_ {
        let router = if in_host { &self.router_in_host } else { &self.router };
        let mut request =
            GuestRequest { uri: "/auth/orders".parse().unwrap(), ..GuestRequest::default() };
        request.headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        request.headers.insert("host", "api.example".parse().unwrap());
        let run = move || match self.rt.block_on(router.handle(request.clone(), RequestId(1))) {
            Ok(GuestOutcome::Forward(f)) => assert_eq!(f.upstream, "service-a"),
            other => panic!("{other:?}"),
        };
        run();
        run
    }
}
