//! What the gateway tells its operators: Prometheus [`metrics`], W3C `trace` context, and
//! the access log (`access`).

pub(crate) mod access;
pub mod metrics;
pub(crate) mod trace;
