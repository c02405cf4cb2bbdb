//! `jws_verify`: a JWS signature checked against the worker's key set with `ring`. The keys
//! stay in the host; the guest only names one by its `kid`.

use edgegate_abi::HostError;
use edgegate_abi::jws::{Alg, MAX_KID_LEN, NO_KID};
use wasmtime::Caller;

use super::{enter, slice};
use crate::keys::VerifyError;
use crate::request::RequestState;

/// A signing input (header and payload, base64url) longer than this is refused: the guest's
/// token cap is far smaller, so this only bounds what a hostile guest can make the host hash.
const MAX_INPUT: u32 = 64 << 10;

/// The longest signature: RSA-8192.
const MAX_SIGNATURE: u32 = 1024;

#[allow(clippy::too_many_arguments, reason = "the ABI passes three buffers and an algorithm")]
pub(super) fn jws_verify(
    mut caller: Caller<'_, RequestState>,
    alg: i32,
    kid_ptr: u32,
    kid_len: u32,
    input_ptr: u32,
    input_len: u32,
    sig_ptr: u32,
    sig_len: u32,
) -> wasmtime::Result<i32> {
    let _span = super::hostcall_span!("jwt", "verify").entered();
    let Some((data, state)) = enter(&mut caller)? else {
        return Ok(HostError::InvalidArgument.code());
    };
    let Some(keys) = &state.worker.keys else { return Ok(HostError::NotGranted.code()) };
    let Some(alg) = Alg::from_code(alg) else { return Ok(HostError::InvalidArgument.code()) };
    if input_len > MAX_INPUT || sig_len > MAX_SIGNATURE {
        return Ok(HostError::LimitExceeded.code());
    }
    let kid = match kid_len {
        NO_KID => None,
        len if len as usize > MAX_KID_LEN => return Ok(HostError::LimitExceeded.code()),
        len => match slice(data, kid_ptr, len) {
            Some(kid) => Some(kid),
            None => return Ok(HostError::InvalidArgument.code()),
        },
    };
    let (Some(input), Some(signature)) =
        (slice(data, input_ptr, input_len), slice(data, sig_ptr, sig_len))
    else {
        return Ok(HostError::InvalidArgument.code());
    };
    Ok(match keys.load().verify(kid, alg, input, signature) {
        Ok(()) => 0,
        Err(VerifyError::UnknownKey) => HostError::NotFound.code(),
        Err(VerifyError::AlgorithmMismatch) => HostError::AlgorithmMismatch.code(),
        Err(VerifyError::BadSignature) => HostError::BadSignature.code(),
        Err(VerifyError::Unavailable) => HostError::Unavailable.code(),
    })
}
