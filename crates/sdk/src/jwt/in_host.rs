//! A token verified whole by the gateway (`jwt_claims`), for a worker that wants the claims
//! and not the work: one host call instead of decoding, parsing and checking in the guest.
//!
//! ```text
//!  verify_in_host(["aud", "sub"]) ─▶ host: the request's bearer token ─▶ jwt::verify, natively,
//!                                   with the worker's keys and its jwt.* policy
//!        ◀─ Jwt { alg, {"aud":…,"sub":…} }  or  Error (the same refusals as [`super::verify`])
//! ```
//!
//! The host runs this SDK's own [`super::verify`], so a token passes exactly when the guest
//! path would pass it. The worker keeps every decision: what a claim routes to, what to log,
//! what to answer.

use alloc::string::String;
use alloc::vec::Vec;

use edgegate_abi::HostError;
use edgegate_abi::jws::{Alg, refused};

use super::{Error, Jwt, range_of};
use crate::json;

/// Room for the first try: the answer of a typical token's few claims.
const FIRST_READ: usize = 512;

/// The request's bearer token, verified by the gateway against this worker's keys and policy
/// (`[workers.NAME.jwt]`), with the claims named in `claims` (none: all of them). The
/// [`Jwt`]'s claims are only those the token has of the named ones, each value as signed.
///
/// ```
/// use edgegate_sdk::jwt;
/// use edgegate_sdk::{Request, Response};
///
/// fn handle(_req: &Request) -> Response {
///     let token = match jwt::verify_in_host(&["sub"]) {
///         Ok(token) => token,
///         Err(e) => return e.response(),
///     };
///     let sub = token.claims().get("sub").and_then(|v| v.as_json_str());
///     Response::text(200, sub.and_then(|s| s.as_str()).unwrap_or("anonymous"))
/// }
/// # // Natively no keys are granted: the gateway's 500 `jwt_not_configured`.
/// # assert_eq!(jwt::verify_in_host(&["sub"]).unwrap_err(), jwt::Error::NotConfigured);
/// ```
pub fn verify_in_host(claims: &[&str]) -> Result<Jwt, Error> {
    let names = claims.iter().map(|name| Some(name.as_bytes()));
    let mut list = Vec::with_capacity(edgegate_abi::kv::list_len(names.clone()));
    for name in names {
        edgegate_abi::kv::push_item(&mut list, name);
    }
    let mut refusal = None;
    let answer = crate::host::read_answer(FIRST_READ, |out| {
        let result = crate::sys::verified_claims(&list, out);
        match refused(result) {
            Some(number) => {
                refusal = Some(number);
                HostError::NotFound.code()
            }
            None => result,
        }
    });
    match (refusal, answer) {
        (Some(number), _) => Err(Error::from_number(number).unwrap_or(Error::Malformed)),
        (None, Ok(answer)) => from_answer(answer),
        (None, Err(error)) => Err(super::host_refusal(error)),
    }
}

/// The host's answer: the algorithm's code as one byte, then the claims' JSON object.
fn from_answer(answer: Vec<u8>) -> Result<Jwt, Error> {
    let alg = answer.first().and_then(|&code| Alg::from_code(i32::from(code)));
    let alg = alg.ok_or(Error::Malformed)?;
    // The code is one ASCII byte, so the whole answer is text exactly when the object is.
    let claims = String::from_utf8(answer).map_err(|_| Error::Malformed)?;
    let object = json::parse_object(&claims[1..], &mut |_, _| Ok::<(), Error>(()))?;
    let claims_object = range_of(&claims, object);
    Ok(Jwt { alg, claims, claims_object })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_the_algorithm_then_the_claims() {
        let mut answer = alloc::vec![Alg::Es256.code() as u8];
        answer.extend_from_slice(br#" {"aud":["a","b"],"sub":"ada"}"#);
        let jwt = from_answer(answer).unwrap();
        assert_eq!(jwt.alg(), Alg::Es256);
        assert_eq!(jwt.audiences().count(), 2);
        assert_eq!(jwt.claims().get("sub").and_then(|v| v.as_json_str()?.as_str()), Some("ada"));
    }

    #[test]
    fn a_broken_answer_is_malformed() {
        for answer in [&b""[..], b"\x00{}", b"\x01", b"\x01{\"a\":1,\"a\":2}", b"\x01\xff"] {
            let expected = if answer.len() > 10 { Error::DuplicateKey } else { Error::Malformed };
            assert_eq!(from_answer(answer.to_vec()).unwrap_err(), expected, "{answer:?}");
        }
    }

    #[test]
    fn natively_no_keys_are_granted() {
        assert_eq!(verify_in_host(&[]).unwrap_err(), Error::NotConfigured);
    }
}
