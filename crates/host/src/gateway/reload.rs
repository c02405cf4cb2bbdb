//! Reloading: build the next snapshot from the configuration file, exactly as start-up built
//! the first, and swap it in only when all of it built.
//!
//! ```text
//!  reread + validate ─▶ settings that need a restart? ─▶ open upstreams, load keys,
//!  check workers (an unchanged file is not read; a module the cache records as checked is
//!  not compiled; any other is compiled and instantiated once) ─▶ compile routes ─▶ swap
//!                                                   any failure: the old snapshot serves on
//! ```
//!
//! Requests that began on the old snapshot finish on it; its pool slots, modules, upstream
//! pools and background tasks are released when the last of them ends.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::build::{self, Steps};
use super::{Gateway, Reloads, Snapshot};
use crate::config::{Config, ConfigError, Loaded};

/// A reload that took effect.
#[derive(Debug, Clone, Serialize)]
pub struct Reloaded {
    /// The generation now serving.
    pub generation: u64,
    /// Workers that are new, or whose module or table changed.
    pub changed: Vec<String>,
    /// Workers no longer configured.
    pub removed: Vec<String>,
    /// Workers whose module is new (by digest), by name, with the new digest.
    pub modules: Vec<(String, String)>,
    /// From reading the file to the swap.
    #[serde(serialize_with = "millis")]
    pub took: Duration,
}

/// Why a reload did not take effect; the snapshot that was serving still is.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The configuration, a module or a key did not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A setting changed that only a restart can change.
    #[error("{file}: {}: cannot change while running; restart edgegate to apply it", keys.join(", "))]
    RestartNeeded {
        /// The configuration file.
        file: String,
        /// The keys that changed.
        keys: Vec<&'static str>,
    },
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

impl Gateway {
    /// Rereads the configuration file (and every module it names), builds the next snapshot
    /// and swaps it in; on any failure the current snapshot keeps serving. Reloads take
    /// turns. Counts the result in `edgegate_reloads_total` and logs it.
    pub async fn reload(&self) -> Result<Reloaded, ReloadError> {
        let reloads = self.reloads.lock().await;
        let started = Instant::now();
        let result = self.build_next(&reloads, started).await;
        match &result {
            Ok(done) => {
                metrics::counter!("edgegate_reloads_total", "result" => "ok").increment(1);
                tracing::info!(
                    generation = done.generation,
                    changed = ?done.changed,
                    removed = ?done.removed,
                    took_ms = done.took.as_secs_f64() * 1000.0,
                    "reloaded"
                );
            }
            Err(error) => {
                metrics::counter!("edgegate_reloads_total", "result" => "error").increment(1);
                tracing::error!(
                    generation = self.generation(),
                    "reload refused, still serving the previous version: {}",
                    crate::error::error_chain(error)
                );
            }
        }
        result
    }

    async fn build_next(
        &self,
        reloads: &Reloads,
        started: Instant,
    ) -> Result<Reloaded, ReloadError> {
        let previous = self.current.load_full();
        let loaded = previous.loaded.reread()?;
        let next = self.build_next_from(reloads, &previous, loaded, None).await?;
        Ok(self.swap_in(previous, next, started, None))
    }

    /// The snapshot that would serve `loaded` after `previous`: refused if a setting changed
    /// that only a restart applies, or if anything does not build. On a deploy of worker
    /// `deploying`, the other workers are carried over without looking at their modules.
    pub(super) async fn build_next_from(
        &self,
        reloads: &Reloads,
        previous: &Snapshot,
        loaded: Loaded,
        deploying: Option<&str>,
    ) -> Result<Snapshot, ReloadError> {
        let keys = restart_needed(&previous.loaded.config, &loaded.config);
        if !keys.is_empty() {
            return Err(ReloadError::RestartNeeded { file: loaded.file.clone(), keys });
        }
        let steps = Steps {
            runtime: &self.runtime,
            loaded: &loaded,
            builtins: reloads.builtins,
            registries: &reloads.registries,
            previous: Some(previous),
            sessions: self.sessions.as_ref(),
            deploying,
            registry_fallback: false,
            admin_token: self.token.hash(),
        };
        Ok(steps.snapshot(previous.kv.clone(), previous.generation + 1).await?)
    }

    /// Puts `next` in service after `previous`, and says what changed: only worker `only`
    /// can have, on a deploy. `previous` is dropped on the blocking pool (if no request still
    /// holds it): freeing ten thousand workers and their routes is work no answer should wait
    /// for.
    pub(super) fn swap_in(
        &self,
        previous: Arc<Snapshot>,
        next: Snapshot,
        started: Instant,
        only: Option<&str>,
    ) -> Reloaded {
        let (changed, removed, modules) = differences(&previous, &next, only);
        next.publish(Some(&previous));
        let generation = next.generation;
        self.current.store(Arc::new(next));
        self.runtime.prune_cache();
        let took = started.elapsed();
        tokio::task::spawn_blocking(move || drop(previous));
        Reloaded { generation, changed, removed, modules, took }
    }
}

/// The workers of `next` that are new or changed, those of `previous` it no longer has, and
/// those whose module is new (with its digest): among every worker, or only `only`.
fn differences(
    previous: &Snapshot,
    next: &Snapshot,
    only: Option<&str>,
) -> (Vec<String>, Vec<String>, Vec<(String, String)>) {
    let names: BTreeSet<&str> = match only {
        Some(name) => [name].into(),
        None => previous.workers.keys().chain(next.workers.keys()).map(String::as_str).collect(),
    };
    let (mut changed, mut removed, mut modules) = (Vec::new(), Vec::new(), Vec::new());
    for name in names {
        let before = previous.workers.get(name);
        match next.workers.get(name) {
            Some(worker) => {
                if build::changed(previous, &next.loaded, name, worker) {
                    changed.push(name.to_owned());
                }
                let digest = &worker.module_info().digest;
                if before.is_none_or(|b| &b.module_info().digest != digest) {
                    modules.push((name.to_owned(), digest.clone()));
                }
            }
            None if before.is_some() => removed.push(name.to_owned()),
            None => {}
        }
    }
    (changed, removed, modules)
}

/// The keys whose change only a restart applies: the listeners and everything the
/// connections were set up with, the engine and its instance pool, and the KV namespaces
/// (opened and seeded once).
fn restart_needed(old: &Config, new: &Config) -> Vec<&'static str> {
    let (a, b) = (&old.server, &new.server);
    let tls = |s: &crate::config::ServerConfig| s.tls.clone();
    let fixed = [
        ("server.listen", a.listen != b.listen),
        ("server.admin", a.admin != b.admin),
        ("server.reuse_port", a.reuse_port != b.reuse_port),
        ("server.scheduler", a.scheduler != b.scheduler),
        ("server.max_connections", a.max_connections != b.max_connections),
        ("server.admin_max_connections", a.admin_max_connections != b.admin_max_connections),
        ("server.max_concurrency", a.max_concurrency != b.max_concurrency),
        ("server.max_headers", a.max_headers != b.max_headers),
        ("server.max_header_bytes", a.max_header_bytes != b.max_header_bytes),
        ("server.handshake_timeout", a.handshake_timeout != b.handshake_timeout),
        ("server.header_read_timeout", a.header_read_timeout != b.header_read_timeout),
        ("server.idle_timeout", a.idle_timeout != b.idle_timeout),
        ("server.h2_keepalive_interval", a.h2_keepalive_interval != b.h2_keepalive_interval),
        ("server.h2_keepalive_timeout", a.h2_keepalive_timeout != b.h2_keepalive_timeout),
        ("server.shutdown_timeout", a.shutdown_timeout != b.shutdown_timeout),
        (
            "server.h2_max_concurrent_streams",
            a.h2_max_concurrent_streams != b.h2_max_concurrent_streams,
        ),
        ("server.h2_stream_window", a.h2_stream_window != b.h2_stream_window),
        ("server.h2_connection_window", a.h2_connection_window != b.h2_connection_window),
        ("server.tls", a.tls.is_some() != b.tls.is_some()),
        ("server.tls.listen", tls(a).map(|t| t.listen) != tls(b).map(|t| t.listen)),
        (
            "server.tls.max_handshakes",
            tls(a).map(|t| t.max_handshakes) != tls(b).map(|t| t.max_handshakes),
        ),
        (
            "server.tls.session_cache",
            tls(a).map(|t| t.session_cache) != tls(b).map(|t| t.session_cache),
        ),
        ("runtime", old.runtime != new.runtime),
        ("kv", old.kv != new.kv),
    ];
    fixed.into_iter().filter_map(|(key, differs)| differs.then_some(key)).collect()
}
