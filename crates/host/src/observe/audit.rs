//! The audit line: one per change made through the admin API (`PUT` and `DELETE
//! /workers/…`), refused or done, on target `edgegate::audit`, with who made it (the admin
//! token, or a tenant), from where (the admin connection's peer), what (the action, the
//! worker as served, its module's digest and its routes) and how it ended. The log line's own
//! timestamp says when. Lines on this target are written whatever `EDGEGATE_LOG` filters out
//! of other targets' info lines, unless it names `edgegate::audit` itself.

use std::net::SocketAddr;

/// The audit log's target.
pub const AUDIT_TARGET: &str = "edgegate::audit";

/// One change, as the audit line tells it.
#[derive(Debug)]
pub(crate) struct Change<'a> {
    /// `admin`, or `tenant:NAME`.
    pub(crate) by: &'a str,
    /// The admin connection's peer.
    pub(crate) from: SocketAddr,
    /// `deploy` or `undeploy`.
    pub(crate) action: &'static str,
    /// The worker, as served (`acme/api`).
    pub(crate) worker: &'a str,
    /// Its module's sha256 after the change (`-` when removed or refused).
    pub(crate) digest: &'a str,
    /// Its routes' names after the change.
    pub(crate) routes: &'a [String],
    /// `ok`, or why it was refused.
    pub(crate) result: Result<u64, String>,
}

/// Writes the audit line of `change`: `info` for a change done, `warn` for one refused.
pub(crate) fn log(change: &Change<'_>) {
    let routes = change.routes.join(",");
    let (result, generation, reason) = match &change.result {
        Ok(generation) => ("ok", *generation, ""),
        Err(why) => ("refused", 0, why.as_str()),
    };
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                target: AUDIT_TARGET,
                $level,
                by = change.by,
                from = %change.from,
                action = change.action,
                worker = change.worker,
                digest = change.digest,
                routes,
                result,
                generation,
                reason,
                "{result}"
            )
        };
    }
    match change.result {
        Ok(_) => line!(tracing::Level::INFO),
        Err(_) => line!(tracing::Level::WARN),
    }
}
