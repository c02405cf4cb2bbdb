//! The host side of the guest ABI's imports (module `edgegate_v1`).
//!
//! Every function first charges the request's host-call budget, then reads or writes guest
//! memory only through the bounds-checked helpers here. A bad pointer or length is the guest's
//! problem: it gets [`edgegate_abi::HostError::InvalidArgument`], never a host panic.

mod clock;
mod config;
mod jws;
mod log;
mod random;
mod request;

use edgegate_abi::{IMPORT_MODULE, imports};
use wasmtime::{Caller, Engine, Linker};

use crate::request::RequestState;

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
    Ok(linker)
}

/// Charges one host call, then gives the guest's memory and the request state together.
/// `None` if the guest has no memory yet (a host call from a start function).
fn enter<'a>(
    caller: &'a mut Caller<'_, RequestState>,
) -> wasmtime::Result<Option<(&'a mut [u8], &'a mut RequestState)>> {
    caller.data_mut().charge_hostcall()?;
    let Some(memory) = caller.data().memory else { return Ok(None) };
    Ok(Some(memory.data_and_store_mut(caller)))
}

/// `[ptr, ptr + len)` of guest memory, if it is inside it.
fn slice(data: &[u8], ptr: u32, len: u32) -> Option<&[u8]> {
    data.get(ptr as usize..(ptr as usize).checked_add(len as usize)?)
}

/// `[ptr, ptr + len)` of guest memory, writable, if it is inside it.
fn slice_mut(data: &mut [u8], ptr: u32, len: u32) -> Option<&mut [u8]> {
    data.get_mut(ptr as usize..(ptr as usize).checked_add(len as usize)?)
}
