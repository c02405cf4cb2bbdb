//! A pool of keep-alive connections and the timeouts requests through it are held to. One
//! builder serves both kinds: each `[upstreams.NAME]` gets its own (forwarding and
//! `upstream://` fetches go through it), and `[fetch]` gets one for workers' fetches to allowed
//! origins.

use std::path::Path;
use std::time::Duration;

use crate::capability::reach::Guard;
use crate::config::{FetchConfig, UpstreamConfig};
use crate::forward::client::{self, ClientError, HttpClient};

/// A pool and its timeouts. Cheap to clone: clones share the connections.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub(crate) client: HttpClient,
    /// From sending a request to its response head.
    pub(crate) first_byte_timeout: Duration,
    /// How long a pooled connection may sit idle, and a response body may stall.
    pub(crate) idle_timeout: Duration,
}

/// What a pool is built from: a `[upstreams.NAME]` table or the `[fetch]` table, which have
/// the same four settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolSettings<'a> {
    pub(crate) connect_timeout: Duration,
    pub(crate) first_byte_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_idle: usize,
    /// CA certificates to trust instead of the public roots (already resolved).
    pub(crate) ca_file: Option<&'a Path>,
    /// The `upstream` label of its connection gauge: the upstream's name, or `(fetch)`.
    pub(crate) name: &'a str,
    /// Where its connections may go: anywhere, but for deployed workers' fetches.
    pub(crate) guard: Guard,
}

impl<'a> PoolSettings<'a> {
    /// The settings of an upstream's pool.
    pub(crate) fn upstream(name: &'a str, config: &UpstreamConfig, ca: Option<&'a Path>) -> Self {
        Self {
            connect_timeout: config.connect_timeout,
            first_byte_timeout: config.first_byte_timeout,
            idle_timeout: config.idle_timeout,
            max_idle: config.max_idle,
            ca_file: ca,
            name,
            guard: Guard::none(),
        }
    }

    /// The settings of the `[fetch]` pool.
    pub(crate) fn fetch(section: &FetchConfig, ca: Option<&'a Path>) -> Self {
        Self {
            connect_timeout: section.connect_timeout,
            first_byte_timeout: section.first_byte_timeout,
            idle_timeout: section.idle_timeout,
            max_idle: section.max_idle,
            ca_file: ca,
            name: "(fetch)",
            guard: Guard::none(),
        }
    }
}

impl Pool {
    /// Builds the pool. Fails only on an unreadable or empty `ca_file`.
    pub(crate) fn new(settings: &PoolSettings<'_>) -> Result<Self, ClientError> {
        let client = client::build(&client::ClientSettings {
            connect_timeout: settings.connect_timeout,
            idle_timeout: settings.idle_timeout,
            max_idle: settings.max_idle,
            ca_file: settings.ca_file,
            name: settings.name,
            guard: settings.guard,
        })?;
        Ok(Self {
            client,
            first_byte_timeout: settings.first_byte_timeout,
            idle_timeout: settings.idle_timeout,
        })
    }
}
