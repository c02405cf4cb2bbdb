//! `jws_verify`: a JWS signature checked against the worker's key set with `ring`. The keys
//! stay in the host; the guest only names one by its `kid`.

use edgegate_abi::HostError;
use edgegate_abi::jws::{Alg, MAX_KID_LEN, NO_KID};
use wasmtime::Caller;

use super::{enter, guest_try, slice};
use crate::capability::keys::VerifyError;
use crate::core_abi::request::RequestState;

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
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    let keys = guest_try!(&state.worker.keys, HostError::NotGranted);
    let alg = guest_try!(Alg::from_code(alg), HostError::InvalidArgument);
    guest_try!(if input_len > MAX_INPUT || sig_len > MAX_SIGNATURE, HostError::LimitExceeded);
    let kid = match kid_len {
        NO_KID => None,
        len => {
            guest_try!(if len as usize > MAX_KID_LEN, HostError::LimitExceeded);
            Some(guest_try!(slice(data, kid_ptr, len), HostError::InvalidArgument))
        }
    };
    let input = guest_try!(slice(data, input_ptr, input_len), HostError::InvalidArgument);
    let signature = guest_try!(slice(data, sig_ptr, sig_len), HostError::InvalidArgument);
    Ok(match keys.load().verify(kid, alg, input, signature) {
        Ok(()) => 0,
        Err(VerifyError::UnknownKey) => HostError::NotFound.code(),
        Err(VerifyError::AlgorithmMismatch) => HostError::AlgorithmMismatch.code(),
        Err(VerifyError::BadSignature) => HostError::BadSignature.code(),
        Err(VerifyError::Unavailable) => HostError::Unavailable.code(),
    })
}
