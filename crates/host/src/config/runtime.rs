//! `[runtime]`: the Wasm engine. None of it can change while the gateway runs.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, duration};
use edgegate_runtime::ByteSize;

/// `[runtime]`: the Wasm engine, which [`crate::runtime_config`] turns into the runtime's own
/// `edgegate_runtime::RuntimeConfig`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Keep compiled modules on disk so they are compiled once. Default true.
    pub cache: bool,
    /// Where (relative to this file). Default `$XDG_CACHE_HOME/edgegate/modules`, else
    /// `~/.cache/edgegate/modules`.
    pub cache_dir: Option<PathBuf>,
    /// A cache entry no load has used for this long is removed (after start-up and each
    /// reload). Default 7 days.
    #[serde(deserialize_with = "duration")]
    pub cache_max_age: Duration,
    /// Past this many bytes in the cache, the least recently used entries are removed; those
    /// the running configuration uses never are. Default 1GiB.
    pub cache_max_size: ByteSize,
    /// How often running guests are checked against their CPU budget and deadline. Default 1ms.
    #[serde(deserialize_with = "duration")]
    pub epoch_tick: Duration,
    /// The largest memory limit any worker may have; sizes the instance pool's address space.
    /// Default 128MiB.
    pub max_worker_memory: ByteSize,
    /// Native stack for guest code; deeper recursion traps. Default 512KiB.
    pub max_wasm_stack: ByteSize,
    /// How many image transforms run at once, process-wide. Default: the CPUs the process may
    /// run on.
    pub image_threads: usize,
    /// How many modules' compiled code stays in memory; past it the least recently used is
    /// evicted, and its worker's next request loads it again. Default 1000.
    pub max_resident: std::num::NonZeroUsize,
    /// How many workers' code may load (from the module cache, or compiling) at once.
    /// Default: the CPUs the process may run on.
    pub load_concurrency: std::num::NonZeroUsize,
    /// How a fresh instance's memory gets its module's data: `cow` maps it copy-on-write
    /// (cheapest for one hot worker), `copy` copies the data segments (no remapping when
    /// requests spread over many workers). Default `cow`.
    pub memory_init: MemoryInit,
    /// How components' memory accesses are kept in bounds: `explicit` checks in the code and
    /// no guard pages (cheaper instantiation), `guard-pages` as core modules (cheaper
    /// compute). Default `explicit`.
    pub component_bounds_checks: edgegate_runtime::BoundsChecks,
}

/// `[runtime] memory_init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryInit {
    /// A copy-on-write image, remapped when a pool slot changes module.
    Cow,
    /// The data segments copied in.
    Copy,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let runtime = edgegate_runtime::RuntimeConfig::default();
        Self {
            cache: true,
            cache_dir: None,
            cache_max_age: edgegate_runtime::Pruning::default().max_age,
            cache_max_size: ByteSize(edgegate_runtime::Pruning::default().max_size),
            epoch_tick: runtime.epoch_tick,
            max_worker_memory: ByteSize(runtime.max_memory),
            max_wasm_stack: ByteSize(runtime.max_wasm_stack as u64),
            image_threads: runtime.image_threads,
            max_resident: runtime.max_resident,
            load_concurrency: std::num::NonZeroUsize::new(runtime.load_concurrency)
                .unwrap_or(std::num::NonZeroUsize::MIN),
            memory_init: if runtime.memory_init_cow { MemoryInit::Cow } else { MemoryInit::Copy },
            component_bounds_checks: runtime.component_bounds_checks,
        }
    }
}

/// Checks what the types alone cannot.
pub(super) fn validate(runtime: &EngineConfig, file: &str) -> Result<(), ConfigError> {
    if runtime.epoch_tick.is_zero() {
        return Err(ConfigError::at(file, "runtime.epoch_tick", "must be longer than zero"));
    }
    Ok(())
}
