//! `[fetch]`: workers' outbound requests to hosts that are not upstreams.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::duration;
use super::upstream::{default_connect_timeout, default_idle_timeout, default_max_idle};

/// `[fetch]`: the pool workers' fetches to allowed hosts go through (a fetch to an upstream
/// uses that upstream's pool and timeouts).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchConfig {
    /// Time to connect (TCP and TLS). Default 2s.
    #[serde(deserialize_with = "duration")]
    pub connect_timeout: Duration,
    /// Time from sending to the response head. Default 10s.
    #[serde(deserialize_with = "duration")]
    pub first_byte_timeout: Duration,
    /// Idle keep-alive connections are closed after this; a body that stalls this long is
    /// cut off. Default 60s.
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Idle connections kept per host. Default 32.
    pub max_idle: usize,
    /// PEM file of the CA certificates to trust instead of the public roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            connect_timeout: default_connect_timeout(),
            first_byte_timeout: Duration::from_secs(10),
            idle_timeout: default_idle_timeout(),
            max_idle: default_max_idle(),
            ca_file: None,
        }
    }
}
