//! Whole tokens verified in the host: the guest SDK's own [`jwt::verify`], compiled natively,
//! over a worker's [`KeySet`]. Behind the `jwt_claims` host call and a split's claim rules,
//! so a token passes there exactly when a worker verifying it in the guest would pass it.
//!
//! ```text
//!  Authorization: Bearer h.p.s ─▶ jwt::bearer_of ─▶ jwt::verify(token, policy, KeySet, now)
//!                                                     │ the worker's jwt.* policy
//!                                                     ▼ and its keys (ring)
//!                                    Jwt ─▶ answer: alg code, {"claim": value as signed, …}
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use edgegate_sdk::json::{JsonStr, Value};
use edgegate_sdk::jwt::{self, Jwt, Validation, Verifier};
use http::HeaderMap;

use crate::capability::keys::{Alg, KeySet, Keys, VerifyError};

impl Verifier for KeySet {
    fn verify(
        &self,
        alg: Alg,
        kid: Option<&[u8]>,
        signing_input: &[u8],
        signature: &[u8],
    ) -> Result<(), jwt::Error> {
        KeySet::verify(self, kid, alg, signing_input, signature).map_err(|error| match error {
            VerifyError::UnknownKey => jwt::Error::UnknownKid,
            VerifyError::AlgorithmMismatch => jwt::Error::AlgMismatch,
            VerifyError::BadSignature => jwt::Error::BadSignature,
            VerifyError::Unavailable => jwt::Error::KeysUnavailable,
        })
    }
}

/// The bearer token of `headers` (by the SDK's rules: none is [`jwt::Error::MissingToken`],
/// two headers or bytes that are not text are malformed), verified with `keys` under
/// `policy` at `now`.
pub fn verify(
    headers: &HeaderMap,
    keys: &Keys,
    policy: &Validation,
    now: SystemTime,
) -> Result<Jwt, jwt::Error> {
    verify_each(headers, keys, policy, now, &mut |_, _| {})
}

/// [`verify`], showing `each` every claim as it is parsed (see [`jwt::verify_each`]).
fn verify_each(
    headers: &HeaderMap,
    keys: &Keys,
    policy: &Validation,
    now: SystemTime,
    each: &mut dyn FnMut(JsonStr<'_>, Value<'_>),
) -> Result<Jwt, jwt::Error> {
    let values = headers.get_all(http::header::AUTHORIZATION).iter().map(|v| v.as_bytes());
    let token = jwt::bearer_of(values)?;
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0));
    jwt::verify_each(token, policy, &**keys.load(), now, each)
}

/// What `jwt_claims` answers for the bearer token of `headers`, verified as [`verify`] does:
/// the token's algorithm's code as one byte, then a JSON object of its claims named in
/// `names` (every claim when `names` is empty), each value as signed. Built as the claims are
/// parsed, in one pass.
pub(crate) fn claims(
    headers: &HeaderMap,
    keys: &Keys,
    policy: &Validation,
    now: SystemTime,
    names: &[&str],
) -> Result<Vec<u8>, jwt::Error> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"\0{");
    let mut each = |key: JsonStr<'_>, value: Value<'_>| {
        if names.is_empty() || names.iter().any(|name| key.eq_str(name)) {
            if out.len() > 2 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(key.raw().as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(value.raw().as_bytes());
        }
    };
    let token = verify_each(headers, keys, policy, now, &mut each)?;
    out[0] = token.alg().code() as u8;
    out.push(b'}');
    Ok(out)
}
