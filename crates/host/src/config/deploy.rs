//! `[deploy]`: the workers the admin API deploys (`PUT /workers/NAME`), kept in a directory
//! beside the configuration file, and what one deploy may ask for.
//!
//! The directory holds, per deployed worker, `NAME.toml` (its `[worker]` table and its
//! `[[routes]]`) and the module it names. Start-up and every reload read the file and the
//! directory together: the file's workers and the directory's form one configuration, checked
//! as one, so a restart serves what was deployed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use edgegate_runtime::ByteSize;
use serde::{Deserialize, Serialize};

use super::{Config, ConfigError, RouteConfig, WorkerConfig};

/// `[deploy]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeployConfig {
    /// The directory the admin API keeps deployed workers in (relative to this file). Unset:
    /// the API answers 404 `deploy_off`.
    pub dir: Option<PathBuf>,
    /// The largest module one deploy may upload. Default 16MiB.
    pub max_module: ByteSize,
    /// The largest `memory` limit a deployed worker may have. Default 128MiB.
    pub max_memory: ByteSize,
    /// The most routes one deployed worker may have. Default 16.
    pub max_routes: usize,
}

impl Default for DeployConfig {
    fn default() -> Self {
        Self {
            dir: None,
            max_module: ByteSize(16 << 20),
            max_memory: ByteSize(128 << 20),
            max_routes: 16,
        }
    }
}

/// One deployed worker's file, `NAME.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployed {
    /// The worker: its module (a file in the directory, `builtin:NAME` or `oci://…`), limits and
    /// grants, as a `[workers.NAME]` table has them.
    pub worker: WorkerConfig,
    /// Its routes. Each serves this worker: `worker` may be left out, and no other target is
    /// allowed.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

/// A deployed worker's file as the API writes it: its `[worker]` table (with `module`) and
/// its `[[routes]]`.
#[derive(Debug, Serialize)]
struct Written<'a> {
    worker: &'a toml::Table,
    routes: &'a [toml::Table],
}

/// A worker name the API accepts: it names a file too.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

impl DeployConfig {
    /// The directory, resolved against the configuration file's.
    pub(crate) fn resolved_dir(&self, base: &Path) -> Option<PathBuf> {
        self.dir.as_ref().map(|dir| base.join(dir))
    }
}

/// Reads every `NAME.toml` of `dir`, by name. A missing directory is an empty one.
pub(super) fn read_dir(dir: &Path) -> Result<BTreeMap<String, (Deployed, String)>, ConfigError> {
    let mut deployed = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(deployed),
        Err(e) => return Err(ConfigError::at(&dir.display().to_string(), "deploy.dir", e)),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) =
            path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".toml"))
        else {
            continue;
        };
        if !valid_name(name) {
            continue;
        }
        let file = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::at(&file, "", e))?;
        let worker = parse(&text, &file)?;
        deployed.insert(name.to_owned(), (worker, text));
    }
    Ok(deployed)
}

/// Parses one deployed worker's file.
pub(crate) fn parse(text: &str, file: &str) -> Result<Deployed, ConfigError> {
    super::parse_as(text, file)
}

/// The text the API writes for a worker: its table with `module` set to `module` (when it
/// uploaded one), and its routes.
pub(crate) fn text(
    mut worker: toml::Table,
    routes: &[toml::Table],
    module: Option<&str>,
) -> Result<String, toml::ser::Error> {
    if let Some(module) = module {
        worker.insert("module".into(), toml::Value::String(module.into()));
    }
    toml::to_string(&Written { worker: &worker, routes })
}

/// Adds the deployed workers to `config`: each worker under its name, its module resolved
/// against `dir`, and its routes (serving it) after the file's own. Checks what one deploy
/// may ask for and that no name or route collides with another.
pub(super) fn merge(
    config: &mut Config,
    dir: &Path,
    deployed: &BTreeMap<String, (Deployed, String)>,
    last: Option<&str>,
) -> Result<(), ConfigError> {
    let limits = config.deploy.clone();
    let mut matches: HashMap<Match, Vec<(String, Vec<String>)>> = HashMap::new();
    for (i, route) in config.routes.iter().enumerate() {
        let name = route.name.clone().unwrap_or_else(|| format!("routes[{i}]"));
        matches.entry(Match::of(route)).or_default().push((name, route.methods.clone()));
    }
    // The worker being deployed goes last, so that a clash is reported against it.
    let others = deployed.iter().filter(|(name, _)| Some(name.as_str()) != last);
    for (name, (worker, _)) in others.chain(last.and_then(|name| deployed.get_key_value(name))) {
        let file = dir.join(format!("{name}.toml")).display().to_string();
        let at = |key: &str, message: String| Err(ConfigError::at(&file, key, message));
        if config.workers.contains_key(name) {
            return at("worker", format!("a worker named `{name}` is in the configuration file"));
        }
        let mut table = worker.worker.clone();
        if super::names_a_file(&table.module) {
            table.module = dir.join(&table.module).display().to_string();
        }
        if table.limits.guest.memory > limits.max_memory.bytes() {
            return at(
                "worker.limits.memory",
                format!("is more than deploy.max_memory ({})", limits.max_memory),
            );
        }
        if worker.routes.len() > limits.max_routes {
            let count = worker.routes.len();
            return at(
                "routes",
                format!("{count} routes, more than deploy.max_routes ({})", limits.max_routes),
            );
        }
        for (i, route) in worker.routes.iter().enumerate() {
            let key = format!("routes[{i}]");
            let other =
                route.upstream.is_some() || route.split.is_some() || route.respond.is_some();
            if other || route.worker.as_ref().is_some_and(|w| w != name) {
                return at(&key, format!("a deployed worker's route serves it, `{name}`, only"));
            }
            let mut route = route.clone();
            route.worker = Some(name.clone());
            let route_name = route.name.get_or_insert_with(|| format!("{name}[{i}]")).clone();
            let same = matches.entry(Match::of(&route)).or_default();
            if let Some((clash, _)) =
                same.iter().find(|(_, methods)| overlap(methods, &route.methods))
            {
                return at(&key, format!("matches the same requests as route `{clash}`"));
            }
            same.push((route_name, route.methods.clone()));
            config.routes.push(route);
        }
        config.workers.insert(name.clone(), table);
    }
    Ok(())
}

/// What a route matches, methods aside: its host, and its exact path or its prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Match {
    host: Option<String>,
    path: Option<String>,
    prefix: Option<String>,
}

impl Match {
    fn of(route: &RouteConfig) -> Self {
        Self {
            host: route.host.as_ref().map(|h| h.to_ascii_lowercase()),
            path: route.path.clone(),
            prefix: route.prefix.clone(),
        }
    }
}

/// Whether two method lists have a method in common (an empty one is every method).
fn overlap(a: &[String], b: &[String]) -> bool {
    a.is_empty() || b.is_empty() || a.iter().any(|m| b.contains(m))
}
