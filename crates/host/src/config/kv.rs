//! `[kv.NAME]`: KV namespaces and their backends.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, optional_duration};
use edgegate_runtime::ByteSize;

/// `[kv.NAME]`: a KV namespace workers can be granted (`workers.NAME.kv`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvConfig {
    /// `memory` (the default: this process, gone at exit), `redb` (a file on this node,
    /// durable) or `redis` (shared by several nodes).
    #[serde(default)]
    pub backend: KvBackend,
    /// `memory`: bytes of keys and values at most; a write past it fails. Default 64MiB.
    pub capacity: Option<ByteSize>,
    /// `redb`: the database file (relative to this file). Namespaces may share one.
    pub path: Option<PathBuf>,
    /// `redis`: `redis://[user:password@]host:port[/db]`.
    pub url: Option<String>,
    /// `redis`: the environment variable holding the URL instead (it may hold a password).
    pub url_env: Option<String>,
    /// `redis`: bound on every call (and connection attempt). Default 100ms.
    #[serde(default, deserialize_with = "optional_duration")]
    pub timeout: Option<Duration>,
    /// `redis`: prepended to every key. Default `edgegate:kv:NAME:`; no two key spaces in
    /// Redis may contain each other (`super::redis`).
    pub key_prefix: Option<String>,
    /// Entries to write at start: a JSON object or NDJSON file (relative to this file), or
    /// `builtin:demo-kv` for the demo's data. Existing keys are overwritten.
    pub seed: Option<String>,
}

/// Where a namespace lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvBackend {
    /// In this process.
    #[default]
    Memory,
    /// In a redb file.
    Redb,
    /// In Redis.
    Redis,
}

/// The demo's seed data.
pub const DEMO_KV_SEED: &str = "builtin:demo-kv";

/// Checks that the fields set belong to the backend chosen.
pub(super) fn validate(kv: &KvConfig, at: &str, file: &str) -> Result<(), ConfigError> {
    let error =
        |key: &str, message: &str| Err(ConfigError::at(file, format!("{at}.{key}"), message));
    let fields = [
        ("capacity", kv.capacity.is_some(), KvBackend::Memory),
        ("path", kv.path.is_some(), KvBackend::Redb),
        ("url", kv.url.is_some(), KvBackend::Redis),
        ("url_env", kv.url_env.is_some(), KvBackend::Redis),
        ("timeout", kv.timeout.is_some(), KvBackend::Redis),
        ("key_prefix", kv.key_prefix.is_some(), KvBackend::Redis),
    ];
    if let Some((field, _, backend)) = fields.iter().find(|(_, set, b)| *set && *b != kv.backend) {
        let backend = format!("{backend:?}").to_lowercase();
        return error(field, &format!("is only for backend = \"{backend}\""));
    }
    match kv.backend {
        KvBackend::Redb if kv.path.is_none() => {
            error("path", "is required with backend = \"redb\"")
        }
        KvBackend::Redis if kv.url.is_some() == kv.url_env.is_some() => {
            error("url", "backend = \"redis\" needs exactly one of `url` and `url_env`")
        }
        _ if kv.timeout.is_some_and(|t| t.is_zero()) => {
            error("timeout", "must be longer than zero")
        }
        _ => Ok(()),
    }
}
