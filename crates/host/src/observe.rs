//! What the gateway tells its operators: Prometheus [`metrics`], W3C `trace` context, the
//! access log (`access`, written by [`access_line`]), the [`log_writer`] every log line goes
//! through, each tenant's `usage`, and the audit line of each change made through the admin
//! API (`audit`).

pub(crate) mod access;
pub mod access_line;
pub mod audit;
pub mod log_writer;
pub mod metrics;
pub mod trace;
pub(crate) mod usage;
