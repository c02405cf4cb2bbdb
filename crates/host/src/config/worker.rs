//! `[workers.NAME]`: a module, its limits, and what it is granted.

use std::collections::BTreeMap;
use std::time::Duration;

use edgegate_runtime::Limits;
use serde::Deserialize;

use super::{Config, ConfigError, ImageConfig, JwtConfig, duration};
use crate::config::size::ByteSize;

/// `[workers.NAME]`: a module and what it may use.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// A `.wasm` file (relative to this file), or `builtin:NAME` for a worker bundled in the
    /// binary.
    pub module: String,
    /// Per-request limits.
    #[serde(default)]
    pub limits: WorkerLimits,
    /// String values the worker reads with `config_get`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The upstreams the worker may forward to (by name in `[upstreams]`). Nothing is
    /// ambient: a forward to any other is refused with 500 `upstream_not_granted`.
    #[serde(default)]
    pub upstreams: Vec<String>,
    /// JWT validation: the keys the host verifies signatures with, and the token policy.
    pub jwt: Option<JwtConfig>,
    /// The KV namespaces (in `[kv]`) the worker may use; any other is `NotGranted`.
    #[serde(default)]
    pub kv: Vec<String>,
    /// The origins the worker may fetch from, `scheme://host[:port]` (`http` or `https`). It
    /// may also fetch `upstream://NAME/…` from the upstreams it is granted.
    #[serde(default)]
    pub fetch: Vec<String>,
    /// The image capability: `true` with the default limits, or a table of them. Without it
    /// the image host calls answer `NotGranted`.
    #[serde(default, deserialize_with = "super::image::grant")]
    pub image: Option<ImageConfig>,
}

/// `[workers.NAME.limits]`: see `edgegate_runtime::Limits` for what each bounds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerLimits {
    /// Linear memory. Default 2MiB.
    pub memory: ByteSize,
    /// CPU time per request. Default 2ms.
    #[serde(deserialize_with = "duration")]
    pub cpu: Duration,
    /// Wall-clock time per request. Default 1s.
    #[serde(deserialize_with = "duration")]
    pub deadline: Duration,
    /// Request body. Default 1MiB.
    pub request_body: ByteSize,
    /// Response body. Default 1MiB.
    pub response_body: ByteSize,
    /// Host calls per request. Default 1000.
    pub hostcalls: u32,
    /// KV operations per request (each key of a batch counts). Default 100.
    pub kv_ops: u32,
    /// The largest value the worker may store. Default 1MiB.
    pub kv_value: ByteSize,
    /// Outbound requests per request. Default 32.
    pub subrequests: u32,
    /// The largest fetched response body. Default 1MiB.
    pub subrequest_body: ByteSize,
}

impl Default for WorkerLimits {
    fn default() -> Self {
        let l = Limits::default();
        Self {
            memory: ByteSize(l.memory),
            cpu: l.cpu,
            deadline: l.deadline,
            request_body: ByteSize(l.request_body),
            response_body: ByteSize(l.response_body),
            hostcalls: l.hostcalls,
            kv_ops: l.kv_ops,
            kv_value: ByteSize(l.kv_value),
            subrequests: l.subrequests,
            subrequest_body: ByteSize(l.subrequest_body),
        }
    }
}

impl From<&WorkerLimits> for Limits {
    fn from(l: &WorkerLimits) -> Self {
        Limits {
            memory: l.memory.bytes(),
            cpu: l.cpu,
            deadline: l.deadline,
            request_body: l.request_body.bytes(),
            response_body: l.response_body.bytes(),
            hostcalls: l.hostcalls,
            kv_ops: l.kv_ops,
            kv_value: l.kv_value.bytes(),
            subrequests: l.subrequests,
            subrequest_body: l.subrequest_body.bytes(),
        }
    }
}

/// Checks a worker's limits, and that what it is granted exists.
pub(super) fn validate(
    name: &str,
    worker: &WorkerConfig,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at = |key: String, message: &str| Err(ConfigError::at(file, key, message));
    let key = |field: &str| format!("workers.{name}.limits.{field}");
    let l = &worker.limits;
    if l.memory.bytes() < 65536 {
        return at(key("memory"), "must be at least 64KiB (one Wasm page)");
    }
    if l.memory > config.runtime.max_worker_memory {
        return Err(ConfigError::at(
            file,
            key("memory"),
            format!(
                "{} is more than runtime.max_worker_memory ({})",
                l.memory, config.runtime.max_worker_memory
            ),
        ));
    }
    if l.cpu.is_zero() {
        return at(key("cpu"), "must be longer than zero");
    }
    if l.deadline.is_zero() {
        return at(key("deadline"), "must be longer than zero");
    }
    if worker.module.trim().is_empty() {
        return at(format!("workers.{name}.module"), "must name a .wasm file or builtin:NAME");
    }
    for (i, upstream) in worker.upstreams.iter().enumerate() {
        if !config.upstreams.contains_key(upstream) {
            return Err(ConfigError::at(
                file,
                format!("workers.{name}.upstreams[{i}]"),
                format!("no upstream named `{upstream}` in [upstreams]"),
            ));
        }
    }
    for (i, ns) in worker.kv.iter().enumerate() {
        if !config.kv.contains_key(ns) {
            return Err(ConfigError::at(
                file,
                format!("workers.{name}.kv[{i}]"),
                format!("no KV namespace named `{ns}` in [kv]"),
            ));
        }
    }
    for (i, origin) in worker.fetch.iter().enumerate() {
        if let Err(error) = crate::capability::origin::Origin::parse(origin) {
            return Err(ConfigError::caused(file, format!("workers.{name}.fetch[{i}]"), error));
        }
    }
    if let Some(jwt) = &worker.jwt {
        super::jwt::validate(jwt, &format!("workers.{name}.jwt"), file)?;
        if let Some(key) = worker.config.keys().find(|k| k.starts_with("jwt.")) {
            return Err(ConfigError::at(
                file,
                format!("workers.{name}.config.{key}"),
                "`jwt.*` values come from [workers.NAME.jwt]; set them there",
            ));
        }
    }
    Ok(())
}
