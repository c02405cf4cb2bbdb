//! `[upstreams.NAME]`: where workers' forward directives send requests, and the pools they use.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, duration};

/// `[upstreams.NAME]`: an HTTP service a worker can forward requests to, through a pool of
/// keep-alive connections.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// `http://host:port` or `https://host:port` (no path: the request's path is kept), or
    /// `builtin:demo-origin` for the demo origin the gateway runs itself on loopback.
    pub url: String,
    /// Time to open a connection (TCP and TLS). Past it: 504. Default 2s.
    #[serde(default = "default_connect_timeout", deserialize_with = "duration")]
    pub connect_timeout: Duration,
    /// Time from sending the request to the response head. Past it: 504. Default 15s.
    #[serde(default = "default_first_byte_timeout", deserialize_with = "duration")]
    pub first_byte_timeout: Duration,
    /// How long a connection may sit idle: a pooled keep-alive connection is closed, a
    /// response body that stalls this long is cut off. Default 60s.
    #[serde(default = "default_idle_timeout", deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Idle connections kept open in the pool. Default 32.
    #[serde(default = "default_max_idle")]
    pub max_idle: usize,
    /// Send the client's `Host` instead of the upstream's authority. Default false.
    #[serde(default)]
    pub preserve_host: bool,
    /// PEM file of the CA certificates to trust for `https`, instead of the public roots.
    pub ca_file: Option<PathBuf>,
}

pub(super) fn default_connect_timeout() -> Duration {
    Duration::from_secs(2)
}

fn default_first_byte_timeout() -> Duration {
    Duration::from_secs(15)
}

pub(super) fn default_idle_timeout() -> Duration {
    Duration::from_secs(60)
}

pub(super) fn default_max_idle() -> usize {
    32
}

/// The `url` of the demo origin.
pub const DEMO_ORIGIN: &str = "builtin:demo-origin";

/// Checks the URL and the timeouts.
pub(super) fn validate(upstream: &UpstreamConfig, at: &str, file: &str) -> Result<(), ConfigError> {
    if upstream.url == DEMO_ORIGIN {
        return Ok(());
    }
    let bad = |message: String| Err(ConfigError::at(file, format!("{at}.url"), message));
    let Ok(uri) = upstream.url.parse::<http::Uri>() else {
        return bad(format!("`{}` is not a URL", upstream.url));
    };
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return bad(format!(
            "`{}` must be http://host:port, https://host:port or {DEMO_ORIGIN}",
            upstream.url
        ));
    }
    if uri.path_and_query().is_some_and(|pq| pq.as_str() != "/") {
        return bad(format!("`{}` must not have a path: the request's path is kept", upstream.url));
    }
    if upstream.ca_file.is_some() && uri.scheme_str() != Some("https") {
        return Err(ConfigError::at(file, format!("{at}.ca_file"), "only applies to https"));
    }
    if upstream.connect_timeout.is_zero() || upstream.first_byte_timeout.is_zero() {
        return Err(ConfigError::at(file, at.to_owned(), "timeouts must be longer than zero"));
    }
    Ok(())
}
