//! `clock_monotonic`: nanoseconds since the first reading in this process; `clock_wall`:
//! nanoseconds since the Unix epoch.

use std::sync::OnceLock;
use std::time::Instant;

use wasmtime::Caller;

use crate::core_abi::request::RequestState;

pub(super) fn clock_monotonic(mut caller: Caller<'_, RequestState>) -> wasmtime::Result<u64> {
    caller.data_mut().charge_hostcall()?;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    Ok(ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64)
}

pub(super) fn clock_wall(mut caller: Caller<'_, RequestState>) -> wasmtime::Result<i64> {
    caller.data_mut().charge_hostcall()?;
    let now = (caller.data().worker.wall_clock)();
    Ok(match now.duration_since(std::time::UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_nanos()).unwrap_or(i64::MAX),
    })
}
