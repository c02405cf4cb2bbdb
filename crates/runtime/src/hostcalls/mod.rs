//! The host side of the guest ABI's imports (module `edgegate_v1`).
//!
//! Every function first charges the request's host-call budget, then reads or writes guest
//! memory only through the bounds-checked helpers here. A bad pointer or length is the guest's
//! problem: it gets [`edgegate_abi::HostError::InvalidArgument`], never a host panic.

mod blob;
mod clock;
mod config;
mod fetch;
mod image;
mod jws;
mod jwt;
mod kv;
mod log;
mod random;
mod request;

use edgegate_abi::{IMPORT_MODULE, imports};
use wasmtime::{Caller, Engine, Linker};

use bytes::Bytes;
use edgegate_abi::HostError;

use crate::request::{Kept, KeptCall, RequestState};

/// A host call's refusal of what the guest asked: returns the [`HostError`]'s code from the
/// host call, so the guest sees an error and the request goes on.
///
/// * `guest_try!(result)` unwraps a `Result<T, HostError>`;
/// * `guest_try!(option, error)` unwraps an `Option<T>`, refusing with `error` on `None`;
/// * `guest_try!(if condition, error)` refuses with `error` when `condition` holds.
///
/// A trap (a spent budget, a broken store) is not a refusal: it stays the host call's `Err`.
macro_rules! guest_try {
    (if $condition:expr, $error:expr) => {
        if $condition {
            return Ok($error.code());
        }
    };
    ($option:expr, $error:expr) => {
        match $option {
            Some(value) => value,
            None => return Ok($error.code()),
        }
    };
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(error) => return Ok(HostError::code(error)),
        }
    };
}

/// The trace span of one host call of `class` (`kv`, `fetch`, `jwt`): a child of the guest's
/// span, named like `kv get`. Disabled, and almost free, unless spans are exported.
macro_rules! hostcall_span {
    ($class:literal, $call:literal) => {
        tracing::info_span!(
            target: crate::SPAN_TARGET,
            "hostcall",
            otel.name = concat!($class, " ", $call),
            hostcall.class = $class,
        )
    };
}
use guest_try;
pub(crate) use hostcall_span;

/// A linker with every host function of ABI v1.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<RequestState>> {
    let mut linker = Linker::new(engine);
    linker.func_wrap(IMPORT_MODULE, imports::REQUEST_READ, request::request_read)?;
    linker.func_wrap(IMPORT_MODULE, imports::LOG_WRITE, log::log_write)?;
    linker.func_wrap(IMPORT_MODULE, imports::CLOCK_MONOTONIC, clock::clock_monotonic)?;
    linker.func_wrap(IMPORT_MODULE, imports::RANDOM_FILL, random::random_fill)?;
    linker.func_wrap(IMPORT_MODULE, imports::CONFIG_GET, config::config_get)?;
    linker.func_wrap(IMPORT_MODULE, imports::CONFIG_ALL, config::config_all)?;
    linker.func_wrap(IMPORT_MODULE, imports::CLOCK_WALL, clock::clock_wall)?;
    linker.func_wrap(IMPORT_MODULE, imports::JWS_VERIFY, jws::jws_verify)?;
    linker.func_wrap(IMPORT_MODULE, imports::JWT_CLAIMS, jwt::jwt_claims)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::KV_GET, kv::kv_get)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::KV_GET_BATCH, kv::kv_get_batch)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::KV_PUT, kv::kv_put)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::KV_PUT_BATCH, kv::kv_put_batch)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::KV_DELETE, kv::kv_delete)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::KV_INCR, kv::kv_incr)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::KV_LIST, kv::kv_list)?;
    linker.func_wrap(IMPORT_MODULE, imports::FETCH_START, fetch::fetch_start)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::FETCH_WAIT, fetch::fetch_wait)?;
    linker.func_wrap(IMPORT_MODULE, imports::REQUEST_HEAD, blob::request_head)?;
    linker.func_wrap(IMPORT_MODULE, imports::BLOB_LEN, blob::blob_len)?;
    linker.func_wrap(IMPORT_MODULE, imports::BLOB_READ, blob::blob_read)?;
    linker.func_wrap(IMPORT_MODULE, imports::IMAGE_PROBE, image::image_probe)?;
    linker.func_wrap_async(IMPORT_MODULE, imports::IMAGE_TRANSFORM, image::image_transform)?;
    Ok(linker)
}

/// Charges one host call, then gives the guest's memory and the request state together.
/// `None` if the guest has no memory yet (a host call from a start function).
fn enter<'a>(
    caller: &'a mut Caller<'_, RequestState>,
) -> wasmtime::Result<Option<(&'a mut [u8], &'a mut RequestState)>> {
    caller.data_mut().charge_hostcall()?;
    Ok(memory(caller))
}

/// The guest's memory and the request state, without charging a host call (for the second
/// half of an asynchronous one).
fn memory<'a>(
    caller: &'a mut Caller<'_, RequestState>,
) -> Option<(&'a mut [u8], &'a mut RequestState)> {
    let memory = caller.data().memory?;
    Some(memory.data_and_store_mut(caller))
}

/// `[ptr, ptr + len)` of guest memory, if it is inside it.
fn slice(data: &[u8], ptr: u32, len: u32) -> Option<&[u8]> {
    data.get(ptr as usize..(ptr as usize).checked_add(len as usize)?)
}

/// `[ptr, ptr + len)` of guest memory, writable, if it is inside it.
fn slice_mut(data: &mut [u8], ptr: u32, len: u32) -> Option<&mut [u8]> {
    data.get_mut(ptr as usize..(ptr as usize).checked_add(len as usize)?)
}

/// The answer kept from the same call, if this is one (it is taken: an answer is re-read
/// once).
fn kept(
    caller: &mut Caller<'_, RequestState>,
    matches: impl FnOnce(&[u8], &KeptCall) -> bool,
) -> Option<(KeptCall, Bytes)> {
    let (data, state) = memory(caller)?;
    let kept = state.kept.take_if(|kept| matches(data, &kept.call))?;
    Some((kept.call, kept.answer))
}

/// Writes `answer` to `[out_ptr, out_ptr + out_cap)` if it fits; otherwise keeps it for the
/// same call again. Returns its length.
fn answer(
    caller: &mut Caller<'_, RequestState>,
    call: impl FnOnce(&[u8], &RequestState) -> KeptCall,
    answer: Bytes,
    out_ptr: u32,
    out_cap: u32,
) -> i32 {
    let Ok(len) = i32::try_from(answer.len()) else { return HostError::LimitExceeded.code() };
    let Some((data, state)) = memory(caller) else {
        return HostError::InvalidArgument.code();
    };
    if answer.len() <= out_cap as usize {
        let Some(out) = slice_mut(data, out_ptr, answer.len() as u32) else {
            return HostError::InvalidArgument.code();
        };
        out.copy_from_slice(&answer);
    } else {
        let call = call(data, state);
        state.kept = Some(Kept { call, answer });
    }
    len
}
