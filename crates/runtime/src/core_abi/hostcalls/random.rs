//! `random_fill`: bytes from the operating system's CSPRNG.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, guest_try, slice_mut};
use crate::core_abi::request::RequestState;

/// At most this many bytes per call.
const MAX_BYTES: u32 = 64 << 10;

pub(super) fn random_fill(
    mut caller: Caller<'_, RequestState>,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<i32> {
    let (data, _) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    guest_try!(if len > MAX_BYTES, HostError::LimitExceeded);
    let out = guest_try!(slice_mut(data, ptr, len), HostError::InvalidArgument);
    match getrandom::fill(out) {
        Ok(()) => Ok(0),
        Err(_) => Ok(HostError::Unavailable.code()),
    }
}
