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

use crate::core_abi::request::{Kept, KeptCall, RequestState};

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
            target: crate::span::SPAN_TARGET,
            "hostcall",
            otel.name = concat!($class, " ", $call),
            hostcall.class = $class,
        )
    };
}
use guest_try;
pub(crate) use hostcall_span;

/// The host functions that may wait (for a store, a fetch, the image threads), linked with
/// `func_wrap_async`: a module importing any of them runs on a fiber so the wait can suspend
/// it. A module importing none can be called without one (crate::core_abi::request). [`linker`]
/// refuses to build if this list and its registrations disagree.
pub(crate) const ASYNC: [&str; 9] = [
    imports::KV_GET,
    imports::KV_GET_BATCH,
    imports::KV_PUT,
    imports::KV_PUT_BATCH,
    imports::KV_DELETE,
    imports::KV_INCR,
    imports::KV_LIST,
    imports::FETCH_WAIT,
    imports::IMAGE_TRANSFORM,
];

/// A linker with every host function of ABI v1.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<RequestState>> {
    let mut l = Registry { linker: Linker::new(engine), waiting: Vec::new() };
    l.sync(imports::REQUEST_READ, request::request_read)?;
    l.sync(imports::LOG_WRITE, log::log_write)?;
    l.sync(imports::CLOCK_MONOTONIC, clock::clock_monotonic)?;
    l.sync(imports::RANDOM_FILL, random::random_fill)?;
    l.sync(imports::CONFIG_GET, config::config_get)?;
    l.sync(imports::CONFIG_ALL, config::config_all)?;
    l.sync(imports::CLOCK_WALL, clock::clock_wall)?;
    l.sync(imports::JWS_VERIFY, jws::jws_verify)?;
    l.sync(imports::JWT_CLAIMS, jwt::jwt_claims)?;
    l.waits(imports::KV_GET, kv::kv_get)?;
    l.waits(imports::KV_GET_BATCH, kv::kv_get_batch)?;
    l.waits(imports::KV_PUT, kv::kv_put)?;
    l.waits(imports::KV_PUT_BATCH, kv::kv_put_batch)?;
    l.waits(imports::KV_DELETE, kv::kv_delete)?;
    l.waits(imports::KV_INCR, kv::kv_incr)?;
    l.waits(imports::KV_LIST, kv::kv_list)?;
    l.sync(imports::FETCH_START, fetch::fetch_start)?;
    l.waits(imports::FETCH_WAIT, fetch::fetch_wait)?;
    l.sync(imports::REQUEST_HEAD, blob::request_head)?;
    l.sync(imports::BLOB_LEN, blob::blob_len)?;
    l.sync(imports::BLOB_READ, blob::blob_read)?;
    l.sync(imports::IMAGE_PROBE, image::image_probe)?;
    l.waits(imports::IMAGE_TRANSFORM, image::image_transform)?;
    l.finish()
}

/// The linker being filled, checking each function against [`ASYNC`]: a function that may
/// wait and is not listed would be called without a fiber, and fail.
struct Registry {
    linker: Linker<RequestState>,
    /// The functions that may wait, registered so far.
    waiting: Vec<&'static str>,
}

impl Registry {
    /// Registers `name`, which never waits.
    fn sync<Params, Args>(
        &mut self,
        name: &'static str,
        func: impl wasmtime::IntoFunc<RequestState, Params, Args>,
    ) -> wasmtime::Result<()> {
        if ASYNC.contains(&name) {
            wasmtime::bail!("`{name}` is listed as a host function that may wait, but never does");
        }
        self.linker.func_wrap(IMPORT_MODULE, name, func).map(drop)
    }

    /// Registers `name`, which may wait.
    fn waits<Params, Args, F>(&mut self, name: &'static str, func: F) -> wasmtime::Result<()>
    where
        Params: wasmtime::WasmTyList,
        Args: wasmtime::WasmRet,
        F: for<'a> Fn(
                Caller<'a, RequestState>,
                Params,
            ) -> Box<dyn std::future::Future<Output = Args> + Send + 'a>
            + Send
            + Sync
            + 'static,
    {
        if !ASYNC.contains(&name) {
            wasmtime::bail!(
                "`{name}` may wait, but is not listed among the host functions that may"
            );
        }
        self.waiting.push(name);
        self.linker.func_wrap_async(IMPORT_MODULE, name, func).map(drop)
    }

    fn finish(self) -> wasmtime::Result<Linker<RequestState>> {
        match ASYNC.iter().find(|name| !self.waiting.contains(name)) {
            Some(name) => wasmtime::bail!("`{name}` is listed as may wait, but not registered"),
            None => Ok(self.linker),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_of_functions_that_may_wait_must_match_the_linker() {
        let engine = Engine::default();
        assert!(linker(&engine).is_ok());
        let mut registry = Registry { linker: Linker::new(&engine), waiting: Vec::new() };
        let listed = registry.sync(imports::KV_GET, |_: Caller<'_, RequestState>| 0i32);
        assert!(listed.unwrap_err().to_string().contains("`kv_get` is listed"));
        let missing = registry.finish().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            missing.contains("`kv_get` is listed as may wait, but not registered"),
            "{missing}"
        );
    }
}
