//! Deploying one worker through the admin API (`PUT` and `DELETE /workers/…`): the
//! configuration with that worker added, replaced or removed, checked and built like a
//! reload, its file written to its owner's folder of the `[deploy] dir` so that a restart
//! serves it, then swapped in. Any failure leaves the serving version and the directory as
//! they were.
//!
//! ```text
//!  module bytes (binary Wasm only) ─▶ FOLDER/NAME-<sha256>.wasm ─▶ config + deployed workers,
//!  checked as one (the deployer's grants, caps and traffic) ─▶ build (the changed worker is
//!  checked; the others are carried over) ─▶ write FOLDER/NAME.toml ─▶ swap
//! ```
//!
//! A worker belongs to its [`Owner`]: the admin token's are at the top of the directory, a
//! tenant's in its folder and served as `TENANT/NAME`. The API only ever names, writes and
//! removes the files it made there.

use std::path::Path;
use std::time::{Instant, SystemTime};

use bytes::Bytes;

use super::Gateway;
use super::reload::{ReloadError, Reloaded};
use crate::config::deploy::{self, is_module_file, module_file};
use crate::config::valid_name;
use crate::config::{ConfigError, Loaded, Owner, Stored};

/// What `PUT /workers/NAME` asked for.
#[derive(Debug)]
pub struct DeployRequest {
    /// The worker's table, as `[workers.NAME]` has it; `module` left out when the module is
    /// uploaded.
    pub worker: toml::Table,
    /// Its routes, as `[[routes]]` has them, without `worker` (or naming this one).
    pub routes: Vec<toml::Table>,
    /// The module's bytes, if uploaded.
    pub module: Option<Bytes>,
}

/// Why a deploy did not take effect; the version that was serving still is.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The configuration has no `[deploy] dir`.
    #[error("the deploy API is off: the configuration has no [deploy] dir")]
    Off,
    /// The name cannot name a worker (and a file).
    #[error(
        "`{0}` is not a name the deploy API takes: 1 to 64 of a-z, 0-9, `-` and `_`, starting with a letter or digit"
    )]
    BadName(String),
    /// The request was not a worker.
    #[error("{0}")]
    BadRequest(String),
    /// The module is over its deployer's `caps.module`.
    #[error("the module is larger than {0}")]
    ModuleTooLarge(String),
    /// No worker of that name was deployed through the API (by this deployer).
    #[error("no worker `{0}` was deployed through the API")]
    NotFound(String),
    /// The worker comes from the configuration file, which the API does not change.
    #[error(
        "worker `{0}` is in the configuration file; the API changes only the workers it deployed"
    )]
    InTheFile(String),
    /// The uploaded module is not binary Wasm: a `.cwasm` (native code), text, anything else.
    #[error("the `module` part")]
    NotWasm(#[source] edgegate_runtime::LoadError),
    /// The configuration with this change did not check or build.
    #[error(transparent)]
    Invalid(#[from] ReloadError),
    /// A file in the deploy directory could not be written.
    #[error("writing `{}`", path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl From<ConfigError> for DeployError {
    fn from(error: ConfigError) -> Self {
        Self::Invalid(ReloadError::Config(error))
    }
}

/// A worker as `GET /workers` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Listed {
    /// Its name, as its deployer names it.
    pub name: String,
    /// The tenant it belongs to, if any.
    pub tenant: Option<String>,
    /// Its module's sha256.
    pub digest: String,
    /// Whether the API deployed it (else it is in the configuration file).
    pub deployed: bool,
    /// When the API deployed it, in RFC 3339.
    pub deployed_at: Option<String>,
    /// Whether its code is in memory.
    pub resident: bool,
    /// The names of its routes.
    pub routes: Vec<String>,
}

impl Gateway {
    /// The largest module `owner` may upload: its `caps.module`.
    pub(crate) fn max_module(&self, owner: &Owner) -> u64 {
        let snapshot = self.current.load();
        let allowance = snapshot.loaded.allowance(owner);
        allowance.map_or(0, |(_, caps)| caps.module.bytes())
    }

    /// Worker `name`'s (as served) module digest and routes' names, if it is served: what an
    /// audit line says of it. One worker's, without listing the others.
    pub(crate) fn worker_summary(&self, name: &str) -> Option<(String, Vec<String>)> {
        let snapshot = self.current.load();
        let digest = snapshot.workers.get(name)?.module_info().digest.clone();
        let routes = snapshot.loaded.config.routes.iter().enumerate();
        let routes = routes
            .filter(|(_, route)| route.worker.as_deref() == Some(name))
            .map(|(i, route)| route.name.clone().unwrap_or_else(|| format!("routes[{i}]")))
            .collect();
        Some((digest, routes))
    }

    /// Every worker served, for `GET /workers`; only `owner`'s when it is a tenant.
    pub(crate) fn worker_listing(&self, owner: Option<&Owner>) -> Vec<Listed> {
        let snapshot = self.current.load();
        let loaded = &snapshot.loaded;
        let mut routes: std::collections::HashMap<&str, Vec<String>> = Default::default();
        for (i, route) in loaded.config.routes.iter().enumerate() {
            if let Some(worker) = &route.worker {
                let name = route.name.clone().unwrap_or_else(|| format!("routes[{i}]"));
                routes.entry(worker.as_str()).or_default().push(name);
            }
        }
        let shown = |name: &str| owner.is_none_or(|owner| loaded.owner(name) == *owner);
        snapshot
            .workers
            .iter()
            .filter(|(name, _)| shown(name))
            .map(|(name, worker)| {
                let stored = loaded.deployed.get(name);
                let tenant = stored.and_then(|s| s.owner.tenant()).map(str::to_owned);
                let own_name = match (owner, stored) {
                    (Some(Owner::Tenant(_)), Some(stored)) => stored.name.clone(),
                    _ => name.clone(),
                };
                Listed {
                    name: own_name,
                    tenant,
                    digest: worker.module_info().digest.clone(),
                    deployed: stored.is_some(),
                    deployed_at: stored
                        .and_then(|s| s.at)
                        .map(|at| humantime::format_rfc3339_seconds(at).to_string()),
                    resident: worker.is_resident(),
                    routes: routes.remove(name.as_str()).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Deploys `owner`'s worker `name` as `request` describes (replacing the one the API
    /// deployed under that name, if any). Takes its turn with reloads; counted in
    /// `edgegate_deploys_total`.
    pub async fn deploy(
        &self,
        owner: &Owner,
        name: &str,
        request: DeployRequest,
    ) -> Result<Reloaded, DeployError> {
        let result = self.change(owner, name, Some(request)).await;
        count("deploy", &result);
        result
    }

    /// Removes `owner`'s worker `name`, which the API deployed, and its routes.
    pub async fn undeploy(&self, owner: &Owner, name: &str) -> Result<Reloaded, DeployError> {
        let result = self.change(owner, name, None).await;
        count("undeploy", &result);
        result
    }

    async fn change(
        &self,
        owner: &Owner,
        name: &str,
        request: Option<DeployRequest>,
    ) -> Result<Reloaded, DeployError> {
        let reloads = self.reloads.lock().await;
        let started = Instant::now();
        let previous = self.current.load_full();
        let dir = previous.loaded.deploy_dir().ok_or(DeployError::Off)?;
        if !valid_name(name) {
            return Err(DeployError::BadName(name.to_owned()));
        }
        let qualified = owner.qualified(name);
        let stored = previous.loaded.deployed.get(&qualified).filter(|s| s.owner == *owner);
        let was = stored.map(|s| s.deployed.worker.module.clone());
        if was.is_none() && previous.loaded.config.workers.contains_key(&qualified) {
            return Err(DeployError::InTheFile(qualified));
        }
        let folder = owner.folder(&dir);
        let file = folder.join(format!("{name}.toml"));
        let (loaded, text, module) = match request {
            Some(request) => {
                let asked = Asked { owner, name, qualified: &qualified, folder: &folder };
                let (loaded, text, module) =
                    deployed(&previous.loaded, &asked, request, was.as_ref())?;
                (loaded, Some(text), module)
            }
            None if was.is_none() => return Err(DeployError::NotFound(qualified)),
            None => (previous.loaded.with_deployed(&qualified, None)?, None, None),
        };
        let built = self.build_next_from(&reloads, &previous, loaded, Some(&qualified)).await;
        let next = match built {
            Ok(next) => next,
            Err(error) => {
                forget_module(&folder, module, was.as_ref());
                return Err(error.into());
            }
        };
        let written = match &text {
            // The folder is new on a first deploy that uploads no module.
            Some(text) => std::fs::create_dir_all(&folder)
                .and_then(|()| crate::atomic::write(&file, text.as_bytes())),
            None => std::fs::remove_file(&file),
        };
        if let Err(source) = written {
            forget_module(&folder, module, was.as_ref());
            return Err(DeployError::Write { path: file, source });
        }
        let done = self.swap_in(previous, next, started, Some(&qualified));
        // The module this worker ran before, if the API uploaded it and it has been replaced.
        if let Some(old) = was.filter(|m| is_module_file(name, m))
            && module.as_ref() != Some(&old)
        {
            let _ = std::fs::remove_file(folder.join(old));
        }
        Ok(done)
    }
}

/// Whose worker a deploy is, and where its files go.
struct Asked<'a> {
    owner: &'a Owner,
    name: &'a str,
    qualified: &'a str,
    folder: &'a Path,
}

/// The configuration with the worker deployed from `request`, the text of its file, and
/// the file name of its uploaded module (written to its folder).
fn deployed(
    loaded: &Loaded,
    asked: &Asked<'_>,
    request: DeployRequest,
    was: Option<&String>,
) -> Result<(Loaded, String, Option<String>), DeployError> {
    let Asked { owner, name, qualified, folder } = *asked;
    let max = loaded.allowance(owner).map_or(0, |(_, caps)| caps.module.bytes());
    let module = match &request.module {
        Some(bytes) if bytes.len() as u64 > max => {
            let cap = match owner {
                Owner::Tenant(tenant) => format!("tenants.{tenant}.caps.module"),
                Owner::Admin | Owner::File => "deploy.caps.module".to_owned(),
            };
            return Err(DeployError::ModuleTooLarge(format!(
                "{cap} ({})",
                edgegate_runtime::ByteSize(max)
            )));
        }
        Some(bytes) => {
            // Refused before it is written: the runtime refuses it again when it reads it.
            edgegate_runtime::binary_wasm(bytes).map_err(DeployError::NotWasm)?;
            let file = module_file(name, &edgegate_runtime::module_digest(bytes));
            let path = folder.join(&file);
            std::fs::create_dir_all(folder)
                .and_then(|()| crate::atomic::write(&path, bytes))
                .map_err(|source| DeployError::Write { path, source })?;
            Some(file)
        }
        None => match request.worker.get("module").and_then(|m| m.as_str()) {
            Some(named) if crate::config::names_a_file(named) => {
                return Err(DeployError::BadRequest(format!(
                    "`module = {named:?}`: a deployed worker names its code by upload, \
                     `builtin:` or `oci://`, never a path"
                )));
            }
            Some(_) => None,
            None => {
                return Err(DeployError::BadRequest(
                    "no module: upload one, or name a `builtin:` or `oci://` module in the worker's table"
                        .into(),
                ));
            }
        },
    };
    let checked = (|| {
        let text = deploy::text(request.worker, &request.routes, module.as_deref())
            .map_err(|e| DeployError::BadRequest(format!("the worker's table: {e}")))?;
        let file = folder.join(format!("{name}.toml")).display().to_string();
        let deployed = deploy::parse(&text, &file)?;
        let stored = Stored {
            owner: owner.clone(),
            name: name.to_owned(),
            deployed,
            text: text.clone(),
            at: Some(SystemTime::now()),
        };
        let next = loaded.with_deployed(qualified, Some(stored))?;
        Ok((next, text))
    })();
    match checked {
        Ok((next, text)) => Ok((next, text, module)),
        Err(error) => {
            forget_module(folder, module, was);
            Err(error)
        }
    }
}

/// Removes an uploaded module that serves nobody (a refused deploy's), unless it is the one
/// the worker serves now.
fn forget_module(folder: &Path, module: Option<String>, serving: Option<&String>) {
    if let Some(module) = module.filter(|m| Some(m) != serving) {
        let _ = std::fs::remove_file(folder.join(module));
    }
}

/// Counts a deploy or an undeploy by result, and logs it.
fn count(action: &'static str, result: &Result<Reloaded, DeployError>) {
    let outcome = if result.is_ok() { "ok" } else { "error" };
    metrics::counter!("edgegate_deploys_total", "action" => action, "result" => outcome)
        .increment(1);
    match result {
        Ok(done) => tracing::info!(
            action,
            generation = done.generation,
            changed = ?done.changed,
            removed = ?done.removed,
            took_ms = done.took.as_secs_f64() * 1000.0,
            "deployed"
        ),
        Err(error) => {
            tracing::warn!(action, "deploy refused: {}", crate::error::error_chain(error))
        }
    }
}
