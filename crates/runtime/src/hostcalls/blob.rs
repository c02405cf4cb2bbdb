//! `request_head`, `blob_len` and `blob_read`: the request without its body, and the bytes the
//! host holds for the request (the body as blob 0, image results after it), read by handle.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, slice_mut};
use crate::request::RequestState;

pub(super) fn request_head(
    mut caller: Caller<'_, RequestState>,
    out_ptr: u32,
    out_cap: u32,
) -> wasmtime::Result<i32> {
    let Some((data, state)) = enter(&mut caller)? else {
        return Ok(HostError::InvalidArgument.code());
    };
    let parts = state.request.head();
    let Some(len) = edgegate_abi::request::encoded_len(&parts) else {
        return Ok(HostError::LimitExceeded.code());
    };
    let Ok(n) = i32::try_from(len) else { return Ok(HostError::LimitExceeded.code()) };
    if len <= out_cap as usize {
        let Some(out) = slice_mut(data, out_ptr, len as u32) else {
            return Ok(HostError::InvalidArgument.code());
        };
        if edgegate_abi::request::encode(&parts, out).is_err() {
            return Ok(HostError::InvalidArgument.code());
        }
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
    let Some((data, state)) = enter(&mut caller)? else {
        return Ok(HostError::InvalidArgument.code());
    };
    let Some(bytes) = state.blob(blob) else { return Ok(HostError::NotFound.code()) };
    let Some(rest) = bytes.get(offset as usize..) else {
        return Ok(HostError::InvalidArgument.code());
    };
    let n = rest.len().min(out_len as usize).min(i32::MAX as usize);
    let Some(out) = slice_mut(data, out_ptr, n as u32) else {
        return Ok(HostError::InvalidArgument.code());
    };
    out.copy_from_slice(&rest[..n]);
    Ok(n as i32)
}
