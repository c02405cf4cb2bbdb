//! What the gateway tells its operators: Prometheus [`metrics`], W3C `trace` context, the
//! access log (`access`, written by [`access_line`]), and the [`log_writer`] every log
//! line goes through.

pub(crate) mod access;
pub mod access_line;
pub mod log_writer;
pub mod metrics;
pub mod trace;
