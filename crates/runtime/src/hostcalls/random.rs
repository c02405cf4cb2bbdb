//! `random_fill`: bytes from the operating system's CSPRNG.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, slice_mut};
use crate::request::RequestState;

/// At most this many bytes per call.
const MAX_BYTES: u32 = 64 << 10;

pub(super) fn random_fill(
    mut caller: Caller<'_, RequestState>,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<i32> {
    let Some((data, _)) = enter(&mut caller)? else { return Ok(HostError::InvalidArgument.code()) };
    if len > MAX_BYTES {
        return Ok(HostError::LimitExceeded.code());
    }
    let Some(out) = slice_mut(data, ptr, len) else { return Ok(HostError::InvalidArgument.code()) };
    match getrandom::fill(out) {
        Ok(()) => Ok(0),
        Err(_) => Ok(HostError::Unavailable.code()),
    }
}
