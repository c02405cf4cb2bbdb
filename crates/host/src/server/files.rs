//! The open-file limit against what the configuration may hold open at once: every client
//! and admin connection, each resident worker's memory image, the connections requests make
//! on, and the process's own. A soft limit lower than that is raised (as far as the hard
//! limit allows); a hard limit lower than that refuses the start, naming the figures, rather
//! than leaving clients to hang when `accept` runs out of descriptors under load.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::config::ServerConfig;

/// Descriptors the process holds besides connections and workers: listeners, the epoll
/// instance, log files, the module cache, the KV store, standard streams.
const BASE: u64 = 64;

/// What the configuration may hold open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Needed {
    connections: u64,
    admin: u64,
    workers: u64,
    outbound: u64,
}

impl Needed {
    /// `resident`: the most workers whose code may be in memory at once (each holds its
    /// memory image open).
    pub(crate) fn of(server: &ServerConfig, resident: u64) -> Self {
        Self {
            connections: server.max_connections as u64,
            admin: server.admin_max_connections as u64,
            workers: resident,
            // Each request running may hold one connection on (an upstream, a fetch, Redis).
            outbound: u64::from(server.max_concurrency),
        }
    }

    fn total(&self) -> u64 {
        self.connections + self.admin + self.workers + self.outbound + BASE
    }
}

/// The open-file limit could not be raised to what the configuration needs.
#[derive(Debug, thiserror::Error)]
#[error(
    "the open-file limit is {hard} (hard), but this configuration may hold {total} files open: \
     {connections} connections (server.max_connections), {admin} admin connections \
     (server.admin_max_connections), {workers} resident workers' memory images \
     (runtime.max_resident, or the workers configured if fewer), {outbound} connections of \
     running requests (server.max_concurrency) and {BASE} of the process's own; raise the \
     limit (LimitNOFILE= in a systemd unit, ulimit -n, the container's nofile) or lower those \
     settings",
    total = needed.total(),
    connections = needed.connections,
    admin = needed.admin,
    workers = needed.workers,
    outbound = needed.outbound
)]
pub struct TooFewFiles {
    hard: u64,
    needed: Needed,
}

/// Raises the soft open-file limit to what `needed` may hold, or says why it cannot.
/// Returns the soft limit now in force.
pub(crate) fn ensure(needed: Needed) -> Result<u64, TooFewFiles> {
    let limit = getrlimit(Resource::Nofile);
    let total = needed.total();
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= total {
        return Ok(soft);
    }
    if hard < total {
        return Err(TooFewFiles { hard, needed });
    }
    let raised = Rlimit { current: Some(total), maximum: limit.maximum };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::info!(from = soft, to = total, "raised the open-file soft limit");
            Ok(total)
        }
        Err(_) => Err(TooFewFiles { hard: soft, needed }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_defaults_need() {
        let needed = Needed::of(&ServerConfig::default(), 1000);
        assert_eq!(needed.total(), 4096 + 64 + 1000 + 256 + BASE);
        let message = TooFewFiles { hard: 1024, needed }.to_string();
        assert!(message.contains("is 1024") && message.contains("5480"), "{message}");
    }
}
