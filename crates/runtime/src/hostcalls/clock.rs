//! `clock_monotonic`: nanoseconds since the first reading in this process.

use std::sync::OnceLock;
use std::time::Instant;

use wasmtime::Caller;

use crate::request::RequestState;

pub(super) fn clock_monotonic(mut caller: Caller<'_, RequestState>) -> wasmtime::Result<u64> {
    caller.data_mut().charge_hostcall()?;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    Ok(ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64)
}
