//! Deploying one worker through the admin API (`PUT` and `DELETE /workers/NAME`): the
//! configuration with that worker added, replaced or removed, checked and built like a
//! reload, its file written to the `[deploy] dir` so that a restart serves it, then swapped
//! in. Any failure leaves the serving version and the directory as they were.
//!
//! ```text
//!  module bytes ─▶ NAME-<sha256>.wasm ─▶ config + deployed workers, checked as one ─▶ build
//!  (the changed worker is checked; the others are unchanged files) ─▶ write NAME.toml ─▶ swap
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;

use super::Gateway;
use super::reload::{ReloadError, Reloaded};
use crate::config::deploy::{self, valid_name};
use crate::config::{ConfigError, Loaded};

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
    /// The module is over `[deploy] max_module`.
    #[error("the module is larger than deploy.max_module ({0})")]
    ModuleTooLarge(edgegate_runtime::ByteSize),
    /// No worker of that name was deployed through the API.
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
        path: PathBuf,
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
    /// Its name.
    pub name: String,
    /// Its module's sha256.
    pub digest: String,
    /// Whether the API deployed it (else it is in the configuration file).
    pub deployed: bool,
    /// Whether its code is in memory.
    pub resident: bool,
    /// The names of its routes.
    pub routes: Vec<String>,
}

impl Gateway {
    /// What `[deploy]` allows one deploy.
    pub(crate) fn deploy_limits(&self) -> crate::config::DeployConfig {
        self.current.load().loaded.config.deploy.clone()
    }

    /// Every worker served, for `GET /workers`.
    pub(crate) fn worker_listing(&self) -> Vec<Listed> {
        let snapshot = self.current.load();
        let loaded = &snapshot.loaded;
        let mut routes: std::collections::HashMap<&str, Vec<String>> = Default::default();
        for (i, route) in loaded.config.routes.iter().enumerate() {
            if let Some(worker) = &route.worker {
                let name = route.name.clone().unwrap_or_else(|| format!("routes[{i}]"));
                routes.entry(worker.as_str()).or_default().push(name);
            }
        }
        snapshot
            .workers
            .iter()
            .map(|(name, worker)| Listed {
                name: name.clone(),
                digest: worker.module_info().digest.clone(),
                deployed: loaded.deployed.contains_key(name),
                resident: worker.is_resident(),
                routes: routes.remove(name.as_str()).unwrap_or_default(),
            })
            .collect()
    }

    /// Deploys worker `name` as `request` describes (replacing the one the API deployed
    /// under that name, if any). Takes its turn with reloads; counted in
    /// `edgegate_deploys_total`.
    pub async fn deploy(
        &self,
        name: &str,
        request: DeployRequest,
    ) -> Result<Reloaded, DeployError> {
        let result = self.change(name, Some(request)).await;
        count("deploy", &result);
        result
    }

    /// Removes worker `name`, which the API deployed, and its routes.
    pub async fn undeploy(&self, name: &str) -> Result<Reloaded, DeployError> {
        let result = self.change(name, None).await;
        count("undeploy", &result);
        result
    }

    async fn change(
        &self,
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
        let was = previous.loaded.deployed.get(name).map(|(d, _)| d.worker.module.clone());
        if was.is_none() && previous.loaded.config.workers.contains_key(name) {
            return Err(DeployError::InTheFile(name.to_owned()));
        }
        let file = dir.join(format!("{name}.toml"));
        let (loaded, text, module) = match request {
            Some(request) => {
                let (loaded, text, module) =
                    deployed(&previous.loaded, &dir, name, request, was.as_ref())?;
                (loaded, Some(text), module)
            }
            None if was.is_none() => return Err(DeployError::NotFound(name.to_owned())),
            None => (previous.loaded.with_deployed(name, None)?, None, None),
        };
        let built = self.build_next_from(&reloads, &previous, loaded, Some(name)).await;
        let next = match built {
            Ok(next) => next,
            Err(error) => {
                forget_module(&dir, module, was.as_ref());
                return Err(error.into());
            }
        };
        let written = match &text {
            // The directory is new on a first deploy that uploads no module.
            Some(text) => std::fs::create_dir_all(&dir)
                .and_then(|()| crate::atomic::write(&file, text.as_bytes())),
            None => std::fs::remove_file(&file),
        };
        if let Err(source) = written {
            forget_module(&dir, module, was.as_ref());
            return Err(DeployError::Write { path: file, source });
        }
        let done = self.swap_in(previous, next, started, Some(name));
        // The module this worker ran before, if the API uploaded it and it has been replaced.
        if let Some(old) = was.filter(|m| crate::config::names_a_file(m))
            && module.as_ref() != Some(&old)
        {
            let _ = std::fs::remove_file(dir.join(old));
        }
        Ok(done)
    }
}

/// The configuration with worker `name` deployed from `request`, the text of its file,
/// and the file name of its uploaded module (written to `dir`).
fn deployed(
    loaded: &Loaded,
    dir: &Path,
    name: &str,
    request: DeployRequest,
    was: Option<&String>,
) -> Result<(Loaded, String, Option<String>), DeployError> {
    let max = loaded.config.deploy.max_module;
    let module = match &request.module {
        Some(bytes) if bytes.len() as u64 > max.bytes() => {
            return Err(DeployError::ModuleTooLarge(max));
        }
        Some(bytes) => {
            // Refused before it is written: the runtime refuses it again when it reads it.
            edgegate_runtime::binary_wasm(bytes).map_err(DeployError::NotWasm)?;
            let digest = edgegate_runtime::module_digest(bytes);
            let file = format!("{name}-{}.wasm", &digest[..16]);
            let path = dir.join(&file);
            std::fs::create_dir_all(dir)
                .and_then(|()| crate::atomic::write(&path, bytes))
                .map_err(|source| DeployError::Write { path, source })?;
            Some(file)
        }
        None if request.worker.contains_key("module") => None,
        None => {
            return Err(DeployError::BadRequest(
                "no module: upload one, or name a `builtin:` or `oci://` module in the worker's table"
                    .into(),
            ));
        }
    };
    let checked = (|| {
        let text = deploy::text(request.worker, &request.routes, module.as_deref())
            .map_err(|e| DeployError::BadRequest(format!("the worker's table: {e}")))?;
        let file = dir.join(format!("{name}.toml")).display().to_string();
        let worker = deploy::parse(&text, &file)?;
        let next = loaded.with_deployed(name, Some((worker, text.clone())))?;
        Ok((next, text))
    })();
    match checked {
        Ok((next, text)) => Ok((next, text, module)),
        Err(error) => {
            forget_module(dir, module, was);
            Err(error)
        }
    }
}

/// Removes an uploaded module that serves nobody (a refused deploy's), unless it is the one
/// the worker serves now.
fn forget_module(dir: &Path, module: Option<String>, serving: Option<&String>) {
    if let Some(module) = module.filter(|m| Some(m) != serving) {
        let _ = std::fs::remove_file(dir.join(module));
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
