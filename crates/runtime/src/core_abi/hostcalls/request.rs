//! `request_read`: the one copy of the request into guest memory.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, guest_try, slice_mut};
use crate::core_abi::request::RequestState;

pub(super) fn request_read(
    mut caller: Caller<'_, RequestState>,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<i32> {
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    guest_try!(if len != state.request_len, HostError::InvalidArgument);
    let out = guest_try!(slice_mut(data, ptr, len), HostError::InvalidArgument);
    match edgegate_abi::request::encode(&state.request.parts(), out) {
        Ok(()) => Ok(0),
        Err(_) => Ok(HostError::InvalidArgument.code()),
    }
}
