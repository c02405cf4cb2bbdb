//! JWS verification keys held by the host, and the `ring` checks behind the `jws_verify`
//! host call.
//!
//! A worker is granted a [`Keys`] handle: a [`KeySet`] behind an `ArcSwap`, so the host can
//! replace it (a JWKS URL refreshed in the background) while requests read it without a lock.
//! Every [`Key`] carries the one algorithm it is for; a token can only ask for that algorithm,
//! never choose another (so an RSA public key is never taken for an HMAC secret).
//!
//! ```text
//!  config: secret (env/file) ─┐
//!          PEM / JWK ─────────┼─▶ Key { kid, alg, material } ─▶ KeySet ─▶ Keys (ArcSwap)
//!          JWKS file / URL ───┘                                   ▲ store() on refresh
//!  guest: jws_verify(alg, kid, input, sig) ─▶ Keys::load().lookup(kid, alg) ─▶ ring verify
//! ```
//!
//! Keys are parsed once, at load or refresh; verification is `ring`'s, constant-time for
//! HMAC, with RSA moduli from 2048 to 8192 bits and ECDSA signatures in `r || s` form.

use std::sync::Arc;

use arc_swap::ArcSwap;
use base64ct::{Base64UrlUnpadded, Encoding};
pub use edgegate_abi::jws::{Alg, MAX_KID_LEN};
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};

/// Why configured key material cannot become a [`Key`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// Not JSON, or not a JWK or JWK Set.
    #[error("not a JWK or JWK Set: {0}")]
    NotJwk(String),
    /// A JWK member is missing, not a string, or not canonical base64url.
    #[error("JWK member `{0}` is missing or not canonical base64url")]
    BadMember(&'static str),
    /// The key type, curve or algorithm is not supported.
    #[error("unsupported key: {0}")]
    Unsupported(String),
    /// An RSA or HMAC key needs its algorithm stated: the token must not pick it.
    #[error("{0} keys need an explicit `alg` (the token must not choose it)")]
    AlgRequired(&'static str),
    /// The JWK names another algorithm than the configuration.
    #[error("the key says `alg` {found} but the configuration says {configured}")]
    AlgConflict {
        /// The JWK's.
        found: String,
        /// The configuration's.
        configured: Alg,
    },
    /// The key is for something else than signatures (`use` other than `sig`).
    #[error("the key's `use` is `{0}`, not `sig`")]
    NotForSignatures(String),
    /// The key's type cannot verify the algorithm it was given.
    #[error("{key} cannot verify {alg}")]
    AlgMismatch {
        /// What the key is (`an RSA key`).
        key: &'static str,
        /// The algorithm.
        alg: Alg,
    },
    /// A key of a JWK Set that the configuration does not say how to use: the whole set is
    /// refused rather than this key skipped, which would fail its tokens with `unknown_kid`.
    #[error("key {key}: {error}")]
    InSet {
        /// Its `kid`, or its place in the set (`#2`).
        key: String,
        /// Why it cannot be used.
        error: Box<KeyError>,
    },
    /// The material does not fit the algorithm.
    #[error("{0}")]
    BadKey(String),
}

#[derive(Debug, Clone)]
enum Material {
    Hmac(ring::hmac::Key),
    Rsa(RsaPublicKeyComponents<Vec<u8>>),
    /// An uncompressed P-256 point, checked to be on the curve.
    P256(Vec<u8>),
    Ed25519([u8; 32]),
}

/// One verification key: its id, its algorithm, and the material, parsed.
#[derive(Debug, Clone)]
pub struct Key {
    kid: Option<String>,
    alg: Alg,
    material: Material,
}

/// Why a signature was not accepted (the host call's negative codes say the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    /// No key has the kid (or the token has none and the set is not exactly one key).
    UnknownKey,
    /// The key is for another algorithm.
    AlgorithmMismatch,
    /// The signature does not verify.
    BadSignature,
    /// No key matched, and a source of keys is unavailable right now: it may be there.
    Unavailable,
}

fn b64(text: &str, member: &'static str) -> Result<Vec<u8>, KeyError> {
    Base64UrlUnpadded::decode_vec(text).map_err(|_| KeyError::BadMember(member))
}

fn rsa_components(n: &[u8], e: &[u8]) -> Result<Material, KeyError> {
    let n: Vec<u8> = n.iter().copied().skip_while(|&b| b == 0).collect();
    let e: Vec<u8> = e.iter().copied().skip_while(|&b| b == 0).collect();
    let bits = n.len() * 8 - n.first().map_or(8, |b| b.leading_zeros() as usize);
    if !(2048..=8192).contains(&bits) {
        return Err(KeyError::BadKey(format!(
            "an RSA modulus of {bits} bits (2048 to 8192 allowed)"
        )));
    }
    if e.is_empty() || e.len() > 4 || e.last().is_some_and(|b| b & 1 == 0) {
        return Err(KeyError::BadKey(
            "an RSA public exponent that is not a small odd number".into(),
        ));
    }
    Ok(Material::Rsa(RsaPublicKeyComponents { n, e }))
}

fn p256_point(point: Vec<u8>) -> Result<Material, KeyError> {
    if point.len() != 65 || point[0] != 4 {
        return Err(KeyError::BadKey("a P-256 key must be an uncompressed point".into()));
    }
    // ring has no public-key check for ECDSA; ECDH validates the peer's point (on the curve,
    // not the identity) before agreeing, which is the same check.
    let rng = ring::rand::SystemRandom::new();
    let private = ring::agreement::EphemeralPrivateKey::generate(&ring::agreement::ECDH_P256, &rng)
        .map_err(|_| KeyError::BadKey("no randomness to check the P-256 point".into()))?;
    let peer = ring::agreement::UnparsedPublicKey::new(&ring::agreement::ECDH_P256, &point);
    ring::agreement::agree_ephemeral(private, &peer, |_| ())
        .map_err(|_| KeyError::BadKey("the point is not on the P-256 curve".into()))?;
    Ok(Material::P256(point))
}

impl Key {
    /// An HMAC key. RFC 7518 §3.2: the secret must be at least as long as the hash.
    pub fn hmac(alg: Alg, secret: &[u8], kid: Option<String>) -> Result<Self, KeyError> {
        let algorithm = match alg {
            Alg::Hs256 => ring::hmac::HMAC_SHA256,
            Alg::Hs384 => ring::hmac::HMAC_SHA384,
            Alg::Hs512 => ring::hmac::HMAC_SHA512,
            other => {
                return Err(KeyError::BadKey(format!("a shared secret cannot be an {other} key")));
            }
        };
        let needed = alg.signature_len().unwrap_or(0);
        if secret.len() < needed {
            return Err(KeyError::BadKey(format!(
                "an {alg} secret must be at least {needed} bytes, this one has {}",
                secret.len()
            )));
        }
        Ok(Self { kid, alg, material: Material::Hmac(ring::hmac::Key::new(algorithm, secret)) })
    }

    /// A public key in PEM: `PUBLIC KEY` (SubjectPublicKeyInfo: RSA, P-256 or Ed25519) or
    /// `RSA PUBLIC KEY` (PKCS#1).
    pub fn from_pem(alg: Alg, pem: &str, kid: Option<String>) -> Result<Self, KeyError> {
        use spki::der::Decode;
        let (label, der) = spki::der::pem::decode_vec(pem.trim().as_bytes())
            .map_err(|e| KeyError::BadKey(format!("not PEM: {e}")))?;
        let material = match label {
            "RSA PUBLIC KEY" => rsa_pkcs1(&der)?,
            "PUBLIC KEY" => {
                let spki = spki::SubjectPublicKeyInfoRef::from_der(&der)
                    .map_err(|e| KeyError::BadKey(format!("not a SubjectPublicKeyInfo: {e}")))?;
                let bits = spki.subject_public_key.as_bytes().ok_or_else(|| {
                    KeyError::BadKey("the public key is not a whole number of bytes".into())
                })?;
                let oid = spki.algorithm.oid;
                if oid == RSA_ENCRYPTION {
                    rsa_pkcs1(bits)?
                } else if oid == EC_PUBLIC_KEY {
                    let curve = spki.algorithm.parameters.and_then(|p| p.decode_as().ok());
                    if curve != Some(PRIME256V1) {
                        return Err(KeyError::Unsupported("an EC key not on P-256".into()));
                    }
                    p256_point(bits.to_vec())?
                } else if oid == ED25519 {
                    Material::Ed25519(
                        bits.try_into().map_err(|_| {
                            KeyError::BadKey("an Ed25519 key must be 32 bytes".into())
                        })?,
                    )
                } else {
                    return Err(KeyError::Unsupported(format!("key algorithm {oid}")));
                }
            }
            other => return Err(KeyError::BadKey(format!("PEM `{other}` is not a public key"))),
        };
        Self::checked(kid, alg, material)
    }

    /// A key from a JWK (RFC 7517). Its algorithm is the JWK's `alg`, else `configured`, else
    /// the only one its curve has (`ES256` for P-256, `EdDSA` for Ed25519). A JWK whose `alg`
    /// differs from `configured` is refused, and so is a `configured` algorithm the key cannot
    /// verify. Private members, if any, are ignored.
    pub fn from_jwk(
        jwk: &serde_json::Value,
        configured: Option<Alg>,
        kid: Option<String>,
    ) -> Result<Self, KeyError> {
        Self::jwk(jwk, AlgRule::Configured(configured), kid)
    }

    fn jwk(jwk: &serde_json::Value, rule: AlgRule, kid: Option<String>) -> Result<Self, KeyError> {
        let text = |name: &'static str| -> Result<Option<&str>, KeyError> {
            match jwk.get(name) {
                None => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(KeyError::BadMember(name)),
            }
        };
        let bytes = |name: &'static str| -> Result<Vec<u8>, KeyError> {
            b64(text(name)?.ok_or(KeyError::BadMember(name))?, name)
        };
        if !jwk.is_object() {
            return Err(KeyError::NotJwk("a JWK must be a JSON object".into()));
        }
        if let Some(usage) = text("use")?.filter(|u| *u != "sig") {
            return Err(KeyError::NotForSignatures(usage.into()));
        }
        let jwk_alg = match text("alg")? {
            None => None,
            Some(name) => Some(
                Alg::from_name(name)
                    .ok_or_else(|| KeyError::Unsupported(format!("algorithm `{name}`")))?,
            ),
        };
        let kid = kid.or(text("kid")?.map(String::from));
        let kty = text("kty")?.ok_or(KeyError::BadMember("kty"))?;
        let crv = text("crv")?;
        let curve_alg = match (kty, crv) {
            ("EC", Some("P-256")) => Some(Alg::Es256),
            ("OKP", Some("Ed25519")) => Some(Alg::EdDsa),
            _ => None,
        };
        let alg = match (rule, jwk_alg) {
            (AlgRule::Configured(Some(configured)), Some(found)) if found != configured => {
                return Err(KeyError::AlgConflict { found: found.name().into(), configured });
            }
            (AlgRule::Configured(configured), _) => jwk_alg.or(configured).or(curve_alg),
            (AlgRule::SetDefault(default), _) => jwk_alg.or(curve_alg).or(default),
        };
        match (kty, crv) {
            ("oct", _) => {
                let alg = alg.ok_or(KeyError::AlgRequired("oct"))?;
                Self::hmac(alg, &bytes("k")?, kid)
            }
            ("RSA", _) => {
                let alg = alg.ok_or(KeyError::AlgRequired("RSA"))?;
                Self::checked(kid, alg, rsa_components(&bytes("n")?, &bytes("e")?)?)
            }
            ("EC", Some("P-256")) => {
                let (x, y) = (bytes("x")?, bytes("y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(KeyError::BadKey("P-256 coordinates must be 32 bytes".into()));
                }
                let point = [&[4u8][..], &x, &y].concat();
                Self::checked(kid, alg.unwrap_or(Alg::Es256), p256_point(point)?)
            }
            ("OKP", Some("Ed25519")) => {
                let x = bytes("x")?
                    .try_into()
                    .map_err(|_| KeyError::BadKey("an Ed25519 key must be 32 bytes".into()))?;
                Self::checked(kid, alg.unwrap_or(Alg::EdDsa), Material::Ed25519(x))
            }
            (kty, crv) => Err(KeyError::Unsupported(match crv {
                Some(crv) => format!("key type {kty} on curve {crv}"),
                None => format!("key type {kty}"),
            })),
        }
    }

    /// Checks that `material` can be used with `alg`.
    fn checked(kid: Option<String>, alg: Alg, material: Material) -> Result<Self, KeyError> {
        let fits = matches!(
            (&material, alg),
            (Material::Hmac(_), Alg::Hs256 | Alg::Hs384 | Alg::Hs512)
                | (Material::Rsa(_), Alg::Rs256 | Alg::Ps256)
                | (Material::P256(_), Alg::Es256)
                | (Material::Ed25519(_), Alg::EdDsa)
        );
        if !fits {
            let key = match material {
                Material::Hmac(_) => "an HMAC secret",
                Material::Rsa(_) => "an RSA key",
                Material::P256(_) => "a P-256 key",
                Material::Ed25519(_) => "an Ed25519 key",
            };
            return Err(KeyError::AlgMismatch { key, alg });
        }
        if kid.as_ref().is_some_and(|k| k.len() > MAX_KID_LEN) {
            return Err(KeyError::BadKey(format!("a kid longer than {MAX_KID_LEN} bytes")));
        }
        Ok(Self { kid, alg, material })
    }

    /// The key id, if it has one.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The one algorithm this key verifies.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// Whether `signature` is this key's signature of `message`.
    ///
    /// Hot path: no allocation; `ring` parses RSA and EC public keys on each call.
    pub fn verify(&self, message: &[u8], sig: &[u8]) -> bool {
        match &self.material {
            Material::Hmac(key) => ring::hmac::verify(key, message, sig).is_ok(),
            Material::Rsa(key) => {
                let params = match self.alg {
                    Alg::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    _ => &signature::RSA_PSS_2048_8192_SHA256,
                };
                key.verify(params, message, sig).is_ok()
            }
            Material::P256(point) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, sig)
                    .is_ok()
            }
            Material::Ed25519(key) => {
                UnparsedPublicKey::new(&signature::ED25519, key).verify(message, sig).is_ok()
            }
        }
    }
}

const RSA_ENCRYPTION: spki::ObjectIdentifier =
    spki::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const EC_PUBLIC_KEY: spki::ObjectIdentifier =
    spki::ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const PRIME256V1: spki::ObjectIdentifier =
    spki::ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const ED25519: spki::ObjectIdentifier = spki::ObjectIdentifier::new_unwrap("1.3.101.112");

fn rsa_pkcs1(der: &[u8]) -> Result<Material, KeyError> {
    use pkcs1::der::Decode;
    let key = pkcs1::RsaPublicKey::<pkcs1::der::asn1::UintRef<'_>>::from_der(der)
        .map_err(|e| KeyError::BadKey(format!("not a PKCS#1 RSA public key: {e}")))?;
    rsa_components(key.modulus.as_bytes(), key.public_exponent.as_bytes())
}

/// Where a JWK's algorithm may come from besides its own `alg`.
#[derive(Debug, Clone, Copy)]
enum AlgRule {
    /// A single configured key: the configuration's algorithm is the key's, and must agree
    /// with the JWK's.
    Configured(Option<Alg>),
    /// A key of a set: the configuration's algorithm is a default for keys whose type has more
    /// than one (RSA, HMAC); a curve with one algorithm uses it.
    SetDefault(Option<Alg>),
}

/// Keys, some of which may be skipped, from a JWK Set.
#[derive(Debug)]
pub struct ParsedJwks {
    /// The usable keys.
    pub keys: Vec<Key>,
    /// Keys left out, and why: keys for encryption, and types, curves, algorithms or material
    /// this gateway does not verify (common in an identity provider's set).
    pub skipped: Vec<(Option<String>, KeyError)>,
}

/// Parses a JWK Set (`{"keys":[…]}`). `default` is the algorithm for keys whose JWK names
/// none and whose type has more than one (RSA, HMAC); a P-256 or Ed25519 key without `alg`
/// uses its curve's one.
///
/// Keys this gateway cannot use are skipped and reported: encryption keys and unsupported
/// types, curves, algorithms or material. A key it could use but is not told how (an RSA or
/// HMAC key without `alg` and no `default`, or a `default` the key cannot verify) refuses the
/// whole set with [`KeyError::InSet`]: skipping it would turn its tokens into `unknown_kid`.
/// A set with no usable key at all is an error too.
pub fn parse_jwks(text: &str, default: Option<Alg>) -> Result<ParsedJwks, KeyError> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| KeyError::NotJwk(e.to_string()))?;
    let list = doc
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or_else(|| KeyError::NotJwk("no `keys` array".into()))?;
    let mut parsed = ParsedJwks { keys: Vec::new(), skipped: Vec::new() };
    for (index, jwk) in list.iter().enumerate() {
        let kid = jwk.get("kid").and_then(|k| k.as_str()).map(String::from);
        match Key::jwk(jwk, AlgRule::SetDefault(default), None) {
            Ok(key) => parsed.keys.push(key),
            // The configuration's doing: no algorithm for the key, or a default it cannot use.
            // (A JWK whose own `alg` does not fit it is the set's doing, and skipped.)
            Err(error @ KeyError::AlgRequired(_)) | Err(error @ KeyError::AlgMismatch { .. })
                if jwk.get("alg").is_none() =>
            {
                let key = kid.map_or_else(|| format!("#{index}"), |kid| format!("`{kid}`"));
                return Err(KeyError::InSet { key, error: Box::new(error) });
            }
            Err(error) => parsed.skipped.push((kid, error)),
        }
    }
    if parsed.keys.is_empty() {
        let why = parsed.skipped.first().map_or("it is empty".into(), |(_, e)| e.to_string());
        return Err(KeyError::NotJwk(format!("no usable key: {why}")));
    }
    Ok(parsed)
}

/// A set of keys, as one worker sees it at one moment.
#[derive(Debug, Default)]
pub struct KeySet {
    keys: Vec<Key>,
    /// Some source of keys could not be read (a JWKS URL not fetched yet, or too stale): a
    /// kid that matches nothing may still be valid, so the answer is "unavailable".
    incomplete: bool,
}

impl KeySet {
    /// A complete set.
    pub fn new(keys: Vec<Key>) -> Self {
        Self { keys, incomplete: false }
    }

    /// Marks the set as missing keys from a source that is down.
    pub fn with_incomplete(mut self, incomplete: bool) -> Self {
        self.incomplete = incomplete;
        self
    }

    /// The keys.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// The key a token's `kid` and `alg` select. A `kid` is compared exactly (it is never a
    /// path or a URL). Without a `kid`, only a set of exactly one key answers.
    pub fn lookup(&self, kid: Option<&[u8]>, alg: Alg) -> Result<&Key, VerifyError> {
        let miss = if self.incomplete { VerifyError::Unavailable } else { VerifyError::UnknownKey };
        if kid.is_none() && self.keys.len() != 1 {
            return Err(miss);
        }
        let mut candidates = self.keys.iter().filter(|key| match kid {
            Some(kid) => key.kid.as_deref().map(str::as_bytes) == Some(kid),
            None => true,
        });
        let first = candidates.next().ok_or(miss)?;
        if first.alg == alg {
            return Ok(first);
        }
        // Rare: two keys with one kid, for two algorithms.
        candidates.find(|key| key.alg == alg).ok_or(VerifyError::AlgorithmMismatch)
    }

    /// Verifies a signature with the key `kid` and `alg` select.
    pub fn verify(
        &self,
        kid: Option<&[u8]>,
        alg: Alg,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), VerifyError> {
        let key = self.lookup(kid, alg)?;
        if key.verify(message, signature) { Ok(()) } else { Err(VerifyError::BadSignature) }
    }
}

/// A worker's key set, replaceable while requests read it.
#[derive(Debug, Clone)]
pub struct Keys(Arc<ArcSwap<KeySet>>);

impl Keys {
    /// A handle on `set`.
    pub fn new(set: KeySet) -> Self {
        Self(Arc::new(ArcSwap::from_pointee(set)))
    }

    /// Replaces the set; requests already verifying keep the one they loaded.
    pub fn store(&self, set: KeySet) {
        self.0.store(Arc::new(set));
    }

    /// The current set. Hot path: one atomic load, no lock.
    pub fn load(&self) -> arc_swap::Guard<Arc<KeySet>> {
        self.0.load()
    }
}

#[cfg(test)]
mod tests;
