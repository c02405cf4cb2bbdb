//! `config_get` and `config_all`: values from the worker's `config` table.

use edgegate_abi::HostError;
use wasmtime::Caller;

use super::{enter, guest_try, slice, slice_mut};
use crate::core_abi::request::RequestState;

/// Keys longer than this cannot be configured, so they are refused without a lookup.
const MAX_KEY: u32 = 256;

pub(super) fn config_get(
    mut caller: Caller<'_, RequestState>,
    key_ptr: u32,
    key_len: u32,
    out_ptr: u32,
    out_cap: u32,
) -> wasmtime::Result<i32> {
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    guest_try!(if key_len > MAX_KEY, HostError::NotFound);
    let key = guest_try!(
        slice(data, key_ptr, key_len).and_then(|k| std::str::from_utf8(k).ok()),
        HostError::InvalidArgument
    );
    let value = guest_try!(state.worker.config.get(key), HostError::NotFound);
    let len = guest_try!(i32::try_from(value.len()).ok(), HostError::LimitExceeded);
    if value.len() <= out_cap as usize {
        let out =
            guest_try!(slice_mut(data, out_ptr, value.len() as u32), HostError::InvalidArgument);
        out.copy_from_slice(value.as_bytes());
    }
    Ok(len)
}

pub(super) fn config_all(
    mut caller: Caller<'_, RequestState>,
    out_ptr: u32,
    out_cap: u32,
) -> wasmtime::Result<i32> {
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    let block = &state.worker.config_block;
    let len = guest_try!(i32::try_from(block.len()).ok(), HostError::LimitExceeded);
    if block.len() <= out_cap as usize {
        let out =
            guest_try!(slice_mut(data, out_ptr, block.len() as u32), HostError::InvalidArgument);
        out.copy_from_slice(block);
    }
    Ok(len)
}
