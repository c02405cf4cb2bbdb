//! `request_read`: the one copy of the request into guest memory.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, slice_mut};
use crate::request::RequestState;

pub(super) fn request_read(
    mut caller: Caller<'_, RequestState>,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<i32> {
    let Some((data, state)) = enter(&mut caller)? else {
        return Ok(HostError::InvalidArgument.code());
    };
    if len != state.request_len {
        return Ok(HostError::InvalidArgument.code());
    }
    let Some(out) = slice_mut(data, ptr, len) else { return Ok(HostError::InvalidArgument.code()) };
    match edgegate_abi::request::encode(&state.request.parts(), out) {
        Ok(()) => Ok(0),
        Err(_) => Ok(HostError::InvalidArgument.code()),
    }
}
