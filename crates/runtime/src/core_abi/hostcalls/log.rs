//! `log_write`: guest messages into the gateway's log, under the target `edgegate::guest`,
//! with their control characters escaped (a guest cannot forge a log line).

use edgegate_abi::LogLevel;
use wasmtime::Caller;

use super::{enter, slice};
use crate::core_abi::request::RequestState;
use crate::guest::escape::escape_control;

/// Longer messages are cut to this many bytes.
const MAX_MESSAGE: u32 = 1024;

pub(super) fn log_write(
    mut caller: Caller<'_, RequestState>,
    level: i32,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<()> {
    let Some((data, state)) = enter(&mut caller)? else { return Ok(()) };
    let Some(bytes) = slice(data, ptr, len.min(MAX_MESSAGE)) else { return Ok(()) };
    let text = String::from_utf8_lossy(bytes);
    let message = escape_control(&text);
    let worker = state.worker.name.as_str();
    let request_id = state.request_id;
    let cut = len > MAX_MESSAGE;
    macro_rules! emit {
        ($level:expr) => {
            tracing::event!(target: "edgegate::guest", $level, worker, %request_id, cut, "{message}")
        };
    }
    match LogLevel::from_code(level) {
        LogLevel::Error => emit!(tracing::Level::ERROR),
        LogLevel::Warn => emit!(tracing::Level::WARN),
        LogLevel::Info => emit!(tracing::Level::INFO),
        LogLevel::Debug => emit!(tracing::Level::DEBUG),
        LogLevel::Trace => emit!(tracing::Level::TRACE),
    }
    Ok(())
}
