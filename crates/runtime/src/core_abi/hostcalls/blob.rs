//! `request_head`, `blob_len` and `blob_read`: the request without its body, and the bytes the
//! host holds for the request (the body as blob 0, image results after it), read by handle.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, guest_try, slice_mut};
use crate::core_abi::request::RequestState;

pub(super) fn request_head(
    mut caller: Caller<'_, RequestState>,
    out_ptr: u32,
    out_cap: u32,
) -> wasmtime::Result<i32> {
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    let parts = state.request.head();
    let len = guest_try!(edgegate_abi::request::encoded_len(&parts), HostError::LimitExceeded);
    let n = guest_try!(i32::try_from(len).ok(), HostError::LimitExceeded);
    if len <= out_cap as usize {
        let out = guest_try!(slice_mut(data, out_ptr, len as u32), HostError::InvalidArgument);
        guest_try!(if edgegate_abi::request::encode(&parts, out).is_err(), HostError::InvalidArgument);
    }
    Ok(n)
}

pub(super) fn blob_len(mut caller: Caller<'_, RequestState>, blob: u32) -> wasmtime::Result<i64> {
    let Some((_, state)) = enter(&mut caller)? else {
        return Ok(HostError::InvalidArgument.code().into());
    };
    Ok(state.blob(blob).map_or(HostError::NotFound.code().into(), |b| b.len() as i64))
}

pub(super) fn blob_read(
    mut caller: Caller<'_, RequestState>,
    blob: u32,
    offset: u32,
    out_ptr: u32,
    out_len: u32,
) -> wasmtime::Result<i32> {
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    let bytes = guest_try!(state.blob(blob), HostError::NotFound);
    let rest = guest_try!(bytes.get(offset as usize..), HostError::InvalidArgument);
    let n = rest.len().min(out_len as usize).min(i32::MAX as usize);
    let out = guest_try!(slice_mut(data, out_ptr, n as u32), HostError::InvalidArgument);
    out.copy_from_slice(&rest[..n]);
    Ok(n as i32)
}
