//! The token checks, natively. Signatures are stubbed here ([`Stub`]) so that every header and
//! claim rule is tested on its own; real signatures are checked with the published vectors
//! under the `guest-*` features (below) and, through the host, in `edgegate-runtime`.

use super::*;
use crate::testing::TestRequest;
use base64ct::{Base64UrlUnpadded, Encoding};
use proptest::prelude::*;
use std::cell::Cell;
use std::format;
use std::string::ToString;
use std::vec;

fn b64(bytes: &[u8]) -> String {
    let mut out = vec![0u8; Base64UrlUnpadded::encoded_len(bytes)];
    Base64UrlUnpadded::encode(bytes, &mut out).unwrap().to_string()
}

fn token(header: &str, claims: &str, signature: &[u8]) -> String {
    format!("{}.{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()), b64(signature))
}

/// A verifier that accepts or refuses every signature, and remembers how it was asked.
struct Stub {
    answer: Result<(), Error>,
    calls: Cell<usize>,
    kid: Cell<Option<usize>>,
}

impl Stub {
    fn accepting() -> Self {
        Self { answer: Ok(()), calls: Cell::new(0), kid: Cell::new(None) }
    }

    fn answering(answer: Error) -> Self {
        Self { answer: Err(answer), ..Self::accepting() }
    }
}

impl Verifier for Stub {
    fn verify(&self, _: Alg, kid: Option<&[u8]>, _: &[u8], _: &[u8]) -> Result<(), Error> {
        self.calls.set(self.calls.get() + 1);
        self.kid.set(kid.map(<[u8]>::len));
        self.answer
    }
}

const NOW: i64 = 1_700_000_000;
const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;
const SIG32: &[u8] = &[7; 32];

fn claims_ok() -> String {
    format!(
        r#"{{"sub":"ada","iss":"https://issuer.example","aud":"service-a","exp":{}}}"#,
        NOW + 300
    )
}

fn check_token(token: &str, validation: &Validation) -> Result<Jwt, Error> {
    verify(token, validation, &Stub::accepting(), NOW)
}

fn check(header: &str, claims: &str) -> Result<Jwt, Error> {
    check_token(&token(header, claims, SIG32), &Validation::default())
}

#[test]
fn a_good_token_passes_and_its_claims_are_readable() {
    let validation = Validation {
        issuer: Some("https://issuer.example".into()),
        audiences: vec!["service-b".into(), "service-a".into()],
        ..Validation::default()
    };
    let jwt = check_token(&token(HS256, &claims_ok(), SIG32), &validation).unwrap();
    assert_eq!(jwt.alg(), Alg::Hs256);
    assert!(jwt.claims().get("sub").unwrap().as_json_str().unwrap().eq_str("ada"));
    let audiences: Vec<&str> = jwt.audiences().map(|a| a.raw()).collect();
    assert_eq!(audiences, ["service-a"]);
}

#[test]
fn alg_none_is_refused_in_every_letter_case() {
    for alg in ["none", "None", "NONE", "nOnE", "\\u006eone"] {
        let header = format!(r#"{{"alg":"{alg}"}}"#);
        assert_eq!(check(&header, &claims_ok()).err(), Some(Error::AlgNone), "{alg}");
    }
}

#[test]
fn unknown_algorithms_are_refused_before_any_key_is_consulted() {
    for alg in ["HS257", "hs256", "Hs256", "RS384", "PS384", "ES512", "ES256K", "", "HS256HS256"] {
        let header = format!(r#"{{"alg":"{alg}"}}"#);
        let stub = Stub::accepting();
        let result =
            verify(&token(&header, &claims_ok(), SIG32), &Validation::default(), &stub, NOW);
        assert_eq!(result.err(), Some(Error::AlgUnsupported), "{alg:?}");
        assert_eq!(stub.calls.get(), 0);
    }
    assert_eq!(check(r#"{"typ":"JWT"}"#, &claims_ok()).err(), Some(Error::Malformed), "no alg");
    assert_eq!(check(r#"{"alg":256}"#, &claims_ok()).err(), Some(Error::Malformed));
}

#[test]
fn the_key_decides_the_algorithm() {
    let stub = Stub::answering(Error::AlgMismatch);
    let result = verify(&token(HS256, &claims_ok(), SIG32), &Validation::default(), &stub, NOW);
    assert_eq!(result.err(), Some(Error::AlgMismatch));
}

#[test]
fn crit_is_refused_whatever_it_names() {
    for crit in [r#"["exp"]"#, "[]", r#""b64""#, r#"["b64"]"#] {
        let header = format!(r#"{{"alg":"HS256","crit":{crit}}}"#);
        assert_eq!(check(&header, &claims_ok()).err(), Some(Error::CritUnsupported), "{crit}");
    }
}

#[test]
fn embedded_keys_are_refused_and_never_used() {
    for (name, value) in [
        ("jwk", r#"{"kty":"oct","k":"AAAA"}"#),
        ("jku", r#""https://attacker.example/jwks.json""#),
        ("x5u", r#""https://attacker.example/cert.pem""#),
        ("x5c", r#"["MIIB"]"#),
    ] {
        let header = format!(r#"{{"alg":"HS256","{name}":{value}}}"#);
        let stub = Stub::accepting();
        let result =
            verify(&token(&header, &claims_ok(), SIG32), &Validation::default(), &stub, NOW);
        assert_eq!(result.err(), Some(Error::EmbeddedKey), "{name}");
        assert_eq!(stub.calls.get(), 0, "{name}: no key lookup at all");
    }
}

#[test]
fn kid_is_exact_bounded_and_passed_to_the_keys() {
    let stub = Stub::accepting();
    let header = r#"{"alg":"HS256","kid":"k\u0031"}"#;
    verify(&token(header, &claims_ok(), SIG32), &Validation::default(), &stub, NOW).unwrap();
    assert_eq!(stub.kid.get(), Some(2), "the decoded kid \"k1\"");

    let long = "k".repeat(MAX_KID_LEN + 1);
    let header = format!(r#"{{"alg":"HS256","kid":"{long}"}}"#);
    let stub = Stub::accepting();
    let result = verify(&token(&header, &claims_ok(), SIG32), &Validation::default(), &stub, NOW);
    assert_eq!(result.err(), Some(Error::UnknownKid));
    assert_eq!(stub.calls.get(), 0, "an over-long kid is never looked up");

    let stub = Stub::answering(Error::UnknownKid);
    let header = r#"{"alg":"HS256","kid":"../../etc/passwd"}"#;
    let result = verify(&token(header, &claims_ok(), SIG32), &Validation::default(), &stub, NOW);
    assert_eq!(result.err(), Some(Error::UnknownKid));
    assert_eq!(check(r#"{"alg":"HS256","kid":7}"#, &claims_ok()).err(), Some(Error::Malformed));
}

#[test]
fn base64_must_be_canonical_and_unpadded_in_every_part() {
    let good = token(HS256, &claims_ok(), SIG32);
    let parts: Vec<&str> = good.split('.').collect();
    for i in 0..3 {
        let mut padded = parts.clone();
        let with_pad = format!("{}=", parts[i]);
        padded[i] = &with_pad;
        let t = padded.join(".");
        assert_eq!(
            check_token(&t, &Validation::default()).err(),
            Some(Error::BadBase64),
            "part {i}"
        );
    }
    // "e30" is "{}"; "e31" decodes to the same bytes with a stray low bit.
    let t = format!("{}.e31.{}", parts[0], parts[2]);
    assert_eq!(check_token(&t, &Validation::default()).err(), Some(Error::BadBase64));
    // The standard alphabet's '+' and '/' are not base64url.
    for other in ["+", "/"] {
        let t = format!("{}.{}.{other}{}", parts[0], parts[1], &parts[2][1..]);
        assert_eq!(check_token(&t, &Validation::default()).err(), Some(Error::BadBase64));
    }
}

#[test]
fn duplicate_keys_are_refused_in_header_and_claims() {
    assert_eq!(
        check(r#"{"alg":"HS256","alg":"none"}"#, &claims_ok()).err(),
        Some(Error::DuplicateKey)
    );
    let claims = format!(r#"{{"sub":"ada","sub":"root","exp":{}}}"#, NOW + 60);
    assert_eq!(check(HS256, &claims).err(), Some(Error::DuplicateKey));
}

#[test]
fn the_size_cap_comes_before_any_decoding() {
    let validation = Validation { max_token_len: 64, ..Validation::default() };
    let stub = Stub::accepting();
    // Not even base64: refused for its length alone.
    let junk = "!".repeat(65);
    assert_eq!(verify(&junk, &validation, &stub, NOW).err(), Some(Error::TokenTooLarge));
    let big =
        token(HS256, &format!(r#"{{"exp":{},"pad":"{}"}}"#, NOW + 60, "x".repeat(9000)), SIG32);
    assert_eq!(check_token(&big, &Validation::default()).err(), Some(Error::TokenTooLarge));
    assert_eq!(stub.calls.get(), 0);
}

#[test]
fn signatures_of_the_wrong_length_are_refused_without_the_keys() {
    for (alg, len) in
        [("HS256", 31), ("HS384", 32), ("HS512", 63), ("ES256", 63), ("ES256", 65), ("EdDSA", 0)]
    {
        let header = format!(r#"{{"alg":"{alg}"}}"#);
        let stub = Stub::accepting();
        let t = token(&header, &claims_ok(), &vec![1; len]);
        assert_eq!(verify(&t, &Validation::default(), &stub, NOW).err(), Some(Error::BadSignature));
        assert_eq!(stub.calls.get(), 0, "{alg} with {len} bytes");
    }
    let t = token(HS256, &claims_ok(), SIG32);
    let bad = verify(&t, &Validation::default(), &Stub::answering(Error::BadSignature), NOW);
    assert_eq!(bad.err(), Some(Error::BadSignature));
}

#[test]
fn a_payload_is_not_decoded_before_its_signature_verifies() {
    let t = format!("{}.not*base64.{}", b64(HS256.as_bytes()), b64(SIG32));
    let refused = verify(&t, &Validation::default(), &Stub::answering(Error::BadSignature), NOW);
    assert_eq!(refused.err(), Some(Error::BadSignature));
    assert_eq!(check_token(&t, &Validation::default()).err(), Some(Error::BadBase64));
}

#[test]
fn shapes_that_are_not_a_compact_jws() {
    let h = b64(HS256.as_bytes());
    let c = b64(claims_ok().as_bytes());
    let s = b64(SIG32);
    for t in [
        String::new(),
        h.clone(),
        format!("{h}.{c}"),
        format!("{h}.{c}.{s}.{s}"),
        format!("{h}.{c}.{s}.{s}.{s}"), // a JWE has five parts
        format!("{}.{c}.{s}", b64(b"[]")),
        format!("{}.{c}.{s}", b64(b"{\"alg\":\"HS256\"")),
        format!("{}.{c}.{s}", b64(b"\xff\xfe")),
        format!("{h}.{}.{s}", b64(b"[1]")),
        format!("{h}.{}.{s}", b64(b"not json")),
    ] {
        assert!(
            matches!(
                check_token(&t, &Validation::default()),
                Err(Error::Malformed | Error::BadBase64)
            ),
            "{t}"
        );
    }
}

#[test]
fn lifetimes_are_checked_with_leeway() {
    let with = |claims: String| check(HS256, &claims).err();
    // exp: valid until exp + leeway.
    assert_eq!(with(format!(r#"{{"exp":{}}}"#, NOW - 59)), None);
    assert_eq!(with(format!(r#"{{"exp":{}}}"#, NOW - 60)), Some(Error::Expired));
    assert_eq!(with(format!(r#"{{"exp":{}}}"#, NOW - 86_400)), Some(Error::Expired));
    // nbf: valid from nbf − leeway.
    assert_eq!(with(format!(r#"{{"exp":{},"nbf":{}}}"#, NOW + 600, NOW + 60)), None);
    assert_eq!(
        with(format!(r#"{{"exp":{},"nbf":{}}}"#, NOW + 600, NOW + 61)),
        Some(Error::NotYetValid)
    );
    // iat: not from the future.
    assert_eq!(with(format!(r#"{{"exp":{},"iat":{}}}"#, NOW + 600, NOW + 60)), None);
    assert_eq!(
        with(format!(r#"{{"exp":{},"iat":{}}}"#, NOW + 600, NOW + 61)),
        Some(Error::IssuedInFuture)
    );
    // Fractional and exponent forms are numbers too.
    assert_eq!(with(format!(r#"{{"exp":{}.5}}"#, NOW + 10)), None);
    assert_eq!(with(r#"{"exp":1.6e9}"#.to_string()), Some(Error::Expired));
    // A huge exp saturates instead of wrapping.
    assert_eq!(with(r#"{"exp":1e300}"#.to_string()), None);
    let strict = Validation { leeway: 0, ..Validation::default() };
    let t = token(HS256, &format!(r#"{{"exp":{}}}"#, NOW - 1), SIG32);
    assert_eq!(check_token(&t, &strict).err(), Some(Error::Expired));
}

#[test]
fn numeric_dates_must_be_numbers() {
    for claims in [
        format!(r#"{{"exp":"{}"}}"#, NOW + 60),
        format!(r#"{{"exp":{},"nbf":"0"}}"#, NOW + 60),
        format!(r#"{{"exp":{},"iat":null}}"#, NOW + 60),
        format!(r#"{{"exp":{},"iat":[1]}}"#, NOW + 60),
        format!(r#"{{"exp":{},"iss":7}}"#, NOW + 60),
        format!(r#"{{"exp":{},"aud":["a",1]}}"#, NOW + 60),
        format!(r#"{{"exp":{},"aud":{{}}}}"#, NOW + 60),
    ] {
        assert_eq!(check(HS256, &claims).err(), Some(Error::BadClaimType), "{claims}");
    }
}

#[test]
fn issuer_must_match_exactly() {
    let v = |iss: &str| Validation { issuer: Some(iss.into()), ..Validation::default() };
    let t = token(HS256, &claims_ok(), SIG32);
    assert!(check_token(&t, &v("https://issuer.example")).is_ok());
    for other in ["https://issuer.example/", "https://ISSUER.example", "issuer.example", ""] {
        assert_eq!(check_token(&t, &v(other)).err(), Some(Error::BadIssuer), "{other:?}");
    }
    let t = token(HS256, &format!(r#"{{"exp":{}}}"#, NOW + 60), SIG32);
    assert_eq!(
        check_token(&t, &v("https://issuer.example")).err(),
        Some(Error::BadIssuer),
        "absent"
    );
}

#[test]
fn audience_may_be_a_string_or_an_array() {
    let v = Validation { audiences: vec!["api".into()], ..Validation::default() };
    let with = |aud: &str| {
        let t = token(HS256, &format!(r#"{{"exp":{},"aud":{aud}}}"#, NOW + 60), SIG32);
        check_token(&t, &v).err()
    };
    assert_eq!(with(r#""api""#), None);
    assert_eq!(with(r#"["web","api"]"#), None);
    assert_eq!(with(r#""API""#), Some(Error::BadAudience));
    assert_eq!(with(r#"["web"]"#), Some(Error::BadAudience));
    assert_eq!(with("[]"), Some(Error::BadAudience));
    let t = token(HS256, &format!(r#"{{"exp":{}}}"#, NOW + 60), SIG32);
    assert_eq!(check_token(&t, &v).err(), Some(Error::BadAudience), "absent");
}

#[test]
fn required_claims_are_configurable() {
    let v = Validation { required: vec!["sub".into(), "jti".into()], ..Validation::default() };
    let t = token(HS256, &claims_ok(), SIG32);
    assert_eq!(check_token(&t, &v).err(), Some(Error::MissingClaim));
    let t = token(HS256, r#"{"sub":"a","jti":"1"}"#, SIG32);
    assert!(check_token(&t, &v).is_ok(), "exp is not required once the list is replaced");
    let t = token(HS256, r#"{"sub":"a"}"#, SIG32);
    assert_eq!(
        check_token(&t, &Validation::default()).err(),
        Some(Error::MissingClaim),
        "exp by default"
    );
}

#[test]
fn validation_reads_its_config_keys() {
    let table = crate::host::Config::from_pairs([
        (config_keys::ISSUER, "iss-1"),
        (config_keys::AUDIENCES, "a, b,,c"),
        (config_keys::LEEWAY, "5"),
        (config_keys::REQUIRED, ""),
        (config_keys::MAX_TOKEN, "4096"),
        ("unrelated", "x"),
    ]);
    let v = Validation::from_table(&table);
    assert_eq!(v.issuer.as_deref(), Some("iss-1"));
    assert_eq!(v.audiences, ["a", "b", "c"]);
    assert_eq!((v.leeway, v.max_token_len), (5, 4096));
    assert!(v.required.is_empty());
    assert_eq!(Validation::from_table(&crate::host::Config::default()), Validation::default());
}

#[test]
fn bearer_tokens_come_from_one_authorization_header() {
    let req = |headers: &[(&str, &str)]| {
        headers.iter().fold(TestRequest::new("GET", "/"), |t, (n, v)| t.header(n, v))
    };
    assert_eq!(
        bearer_token(&req(&[("Authorization", "Bearer abc.def.ghi")]).request()),
        Ok("abc.def.ghi")
    );
    assert_eq!(bearer_token(&req(&[("authorization", "bearer  a.b.c ")]).request()), Ok("a.b.c"));
    assert_eq!(bearer_token(&req(&[]).request()), Err(Error::MissingToken));
    assert_eq!(
        bearer_token(&req(&[("Authorization", "Basic YTpi")]).request()),
        Err(Error::MissingToken)
    );
    assert_eq!(
        bearer_token(&req(&[("Authorization", "Bearer")]).request()),
        Err(Error::MissingToken)
    );
    assert_eq!(
        bearer_token(&req(&[("Authorization", "Bearer ")]).request()),
        Err(Error::MissingToken)
    );
    assert_eq!(
        bearer_token(
            &req(&[("Authorization", "Bearer a.b.c"), ("Authorization", "Bearer d.e.f")]).request()
        ),
        Err(Error::Malformed)
    );
}

#[test]
fn refusals_become_401_with_a_bearer_challenge_and_a_short_code() {
    let r = Error::Expired.response();
    assert_eq!(r.status(), 401);
    assert_eq!(r.header("www-authenticate"), Some(&b"Bearer error=\"invalid_token\""[..]));
    assert_eq!(r.body(), br#"{"error":"token_expired"}"#);
    let r = Error::MissingToken.response();
    assert_eq!((r.status(), r.header("www-authenticate")), (401, Some(&b"Bearer"[..])));
    assert!(matches!(
        Error::KeysUnavailable.response().outcome(),
        edgegate_abi::outcome::Outcome::Error { code: ErrorCode::Unavailable, .. }
    ));
}

proptest! {
    #[test]
    fn arbitrary_tokens_never_panic(token in "[A-Za-z0-9_.=+/-]{0,200}") {
        let _ = verify(&token, &Validation::default(), &Stub::accepting(), NOW);
    }

    #[test]
    fn arbitrary_headers_and_claims_never_panic(
        header in "\\{(\"[a-z]{1,4}\":(\"[A-Za-z0-9]{0,6}\"|[0-9]{1,3}|\\[\\]|null),?){0,4}\\}",
        claims in "\\{(\"[a-z]{1,4}\":(\"[a-z]{0,4}\"|-?[0-9]{1,12}(\\.[0-9])?|true|\\[\"a\"\\]),?){0,5}\\}",
        sig_len in 0usize..80,
    ) {
        let t = token(&header, &claims, &vec![0; sig_len]);
        let _ = verify(&t, &Validation::default(), &Stub::accepting(), NOW);
    }
}

/// The published vectors, verified in the guest (RFC 7515 A.1–A.3, RFC 8037 A.4, RFC 7520 §4).
#[cfg(feature = "guest-crypto")]
mod vectors {
    use super::*;
    use crate::jwt::guest::GuestKeys;

    const VECTORS: &str = include_str!("../../../../testdata/jose/rfc-vectors.json");

    /// Every vector as (name, token, a JWK with `alg`, expectation, payload, claims?).
    pub(super) fn all() -> Vec<(String, String, String, String, Option<String>, bool)> {
        let doc: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
        doc["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let mut jwk = v["jwk"].clone();
                jwk["alg"] = v["alg"].clone();
                (
                    v["name"].as_str().unwrap().into(),
                    v["token"].as_str().unwrap().into(),
                    jwk.to_string(),
                    v["expect"].as_str().unwrap().into(),
                    v["payload"].as_str().map(Into::into),
                    v["claims"].as_bool().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn published_vectors_verify_in_the_guest() {
        let vectors = all();
        assert_eq!(vectors.len(), 8);
        for (name, token, jwk, expect, payload, _) in vectors {
            let keys = GuestKeys::from_jwks(&jwk).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            match verify_jws(&token, DEFAULT_MAX_TOKEN_LEN, &keys) {
                Ok(jws) => {
                    assert_eq!(expect, "valid", "{name}");
                    if let Some(payload) = payload {
                        assert_eq!(jws.payload(), payload.as_bytes(), "{name}");
                    }
                }
                Err(e) => assert_eq!(e.code(), expect, "{name}"),
            }
            // One flipped bit in the signature must break every valid one.
            if expect == "valid" {
                let mut bad = token.clone();
                let last = bad.pop().unwrap();
                bad.push(if last == 'A' { 'Q' } else { 'A' });
                let refused = verify_jws(&bad, DEFAULT_MAX_TOKEN_LEN, &keys).err();
                assert!(
                    matches!(refused, Some(Error::BadSignature | Error::BadBase64)),
                    "{name}: {refused:?}"
                );
            }
        }
    }

    #[test]
    fn rfc7515_claims_hold_at_a_pinned_clock() {
        // A.1–A.3 carry {"iss":"joe","exp":1300819380,…}: valid in March 2011.
        let validation = Validation { issuer: Some("joe".into()), ..Validation::default() };
        let exp = 1_300_819_380;
        for (name, token, jwk, _, _, claims) in all() {
            if !claims {
                continue;
            }
            let keys = GuestKeys::from_jwks(&jwk).unwrap();
            let jwt = verify(&token, &validation, &keys, exp - 3600)
                .unwrap_or_else(|e| panic!("{name}: {e:?}"));
            assert_eq!(
                jwt.claims().get("http://example.com/is_root"),
                Some(json::Value::Bool(true))
            );
            assert!(verify(&token, &validation, &keys, exp + 59).is_ok(), "{name}: leeway");
            assert_eq!(
                verify(&token, &validation, &keys, exp + 60).err(),
                Some(Error::Expired),
                "{name}"
            );
            assert_eq!(
                verify(&token, &validation, &keys, NOW).err(),
                Some(Error::Expired),
                "{name}: today"
            );
        }
    }

    #[test]
    fn an_rsa_public_key_is_never_an_hmac_secret() {
        // The classic confusion: sign HS256 with the RSA public key's bytes and hope the
        // verifier lets the header pick the algorithm. The key says RS256, so it is refused.
        let (_, _, jwk, ..) = all().into_iter().find(|v| v.0 == "rfc7515-a2-rs256").unwrap();
        let keys = GuestKeys::from_jwks(&jwk).unwrap();
        let t = token(r#"{"alg":"HS256"}"#, r#"{"exp":9999999999}"#, SIG32);
        assert_eq!(verify(&t, &Validation::default(), &keys, NOW).err(), Some(Error::AlgMismatch));
    }

    #[test]
    fn ecdsa_signatures_with_r_or_s_out_of_range_are_refused() {
        let (_, token, jwk, ..) = all().into_iter().find(|v| v.0 == "rfc7515-a3-es256").unwrap();
        let keys = GuestKeys::from_jwks(&jwk).unwrap();
        let input = token.rsplit_once('.').unwrap().0.to_string();
        // The order n of P-256.
        let n: [u8; 32] = [
            0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2,
            0xfc, 0x63, 0x25, 0x51,
        ];
        let real = b64::decode(token.rsplit_once('.').unwrap().1).unwrap();
        let (r, s) = real.split_at(32);
        for (r, s) in [
            (&[0u8; 32][..], s),
            (r, &[0u8; 32][..]),
            (&n[..], s),
            (r, &n[..]),
            (&[0xff; 32][..], s),
        ] {
            let sig = [r, s].concat();
            let t = format!("{input}.{}", super::b64(&sig));
            assert_eq!(
                verify_jws(&t, DEFAULT_MAX_TOKEN_LEN, &keys).err(),
                Some(Error::BadSignature)
            );
        }
    }
}

#[test]
fn every_refusal_has_its_own_number_and_code() {
    let mut codes = alloc::collections::BTreeSet::new();
    for (i, error) in Error::ALL.into_iter().enumerate() {
        assert_eq!(error.number(), i as u32 + 1);
        assert_eq!(Error::from_number(error.number()), Some(error));
        assert!(codes.insert(error.code()), "{error:?} shares its code");
    }
    assert_eq!((Error::from_number(0), Error::from_number(22)), (None, None));
}
