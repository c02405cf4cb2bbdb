//! `config_get` and `config_all`: values from the worker's `config` table.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, slice, slice_mut};
use crate::request::RequestState;

/// Keys longer than this cannot be configured, so they are refused without a lookup.
const MAX_KEY: u32 = 256;

pub(super) fn config_get(
    mut caller: Caller<'_, RequestState>,
    key_ptr: u32,
    key_len: u32,
    out_ptr: u32,
    out_cap: u32,
) -> wasmtime::Result<i32> {
    let Some((data, state)) = enter(&mut caller)? else {
        return Ok(HostError::InvalidArgument.code());
    };
    if key_len > MAX_KEY {
        return Ok(HostError::NotFound.code());
    }
    let Some(key) = slice(data, key_ptr, key_len).and_then(|k| std::str::from_utf8(k).ok()) else {
        return Ok(HostError::InvalidArgument.code());
    };
    let Some(value) = state.worker.config.get(key) else { return Ok(HostError::NotFound.code()) };
    let Ok(len) = i32::try_from(value.len()) else { return Ok(HostError::LimitExceeded.code()) };
    if value.len() <= out_cap as usize {
        let Some(out) = slice_mut(data, out_ptr, value.len() as u32) else {
            return Ok(HostError::InvalidArgument.code());
        };
        out.copy_from_slice(value.as_bytes());
    }
    Ok(len)
}

pub(super) fn config_all(
    mut caller: Caller<'_, RequestState>,
    out_ptr: u32,
    out_cap: u32,
) -> wasmtime::Result<i32> {
    let Some((data, state)) = enter(&mut caller)? else {
        return Ok(HostError::InvalidArgument.code());
    };
    let block = &state.worker.config_block;
    let Ok(len) = i32::try_from(block.len()) else { return Ok(HostError::LimitExceeded.code()) };
    if block.len() <= out_cap as usize {
        let Some(out) = slice_mut(data, out_ptr, block.len() as u32) else {
            return Ok(HostError::InvalidArgument.code());
        };
        out.copy_from_slice(block);
    }
    Ok(len)
}
