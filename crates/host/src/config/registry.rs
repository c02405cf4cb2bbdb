//! `[registry]`: how workers named `module = "oci://…"` are pulled. Credentials are never
//! here: they come from the environment or a docker `config.json` ([`crate::registry`]).

use std::time::Duration;

use edgegate_runtime::ByteSize;
use serde::Deserialize;

use super::{ConfigError, duration};

/// `[registry]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryConfig {
    /// Registries (`host[:port]`) spoken to over plain HTTP. A registry on loopback always
    /// is; any other only when listed here.
    pub insecure: Vec<String>,
    /// The longest one reference may take to resolve and pull. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub timeout: Duration,
    /// The largest module a pull accepts. Default 64MiB.
    pub max_module: ByteSize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            insecure: Vec::new(),
            timeout: Duration::from_secs(30),
            max_module: ByteSize(64 << 20),
        }
    }
}

pub(super) fn validate(registry: &RegistryConfig, file: &str) -> Result<(), ConfigError> {
    if registry.timeout.is_zero() {
        return Err(ConfigError::at(file, "registry.timeout", "must be longer than zero"));
    }
    if registry.max_module.bytes() == 0 {
        return Err(ConfigError::at(file, "registry.max_module", "must be larger than zero"));
    }
    for (i, host) in registry.insecure.iter().enumerate() {
        if host.is_empty() || host.contains('/') || host.contains("://") {
            return Err(ConfigError::at(
                file,
                format!("registry.insecure[{i}]"),
                "must be a registry's host[:port], like registry.internal:5000",
            ));
        }
    }
    Ok(())
}
