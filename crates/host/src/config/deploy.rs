//! `[deploy]`: the workers the admin API deploys (`PUT /workers/NAME`), kept in a directory
//! beside the configuration file, and what the admin token may ask for there (a tenant's token
//! is held to its `[tenants.NAME]` instead).
//!
//! The directory holds only files the API made, each named by the API:
//!
//! ```text
//!  deployed/
//!    hello.toml                    the admin token's worker `hello`: [worker] and [[routes]]
//!    hello-0123456789abcdef.wasm   its uploaded module: NAME-<16 hex digits of its sha256>
//!    acme/                         tenant `acme`'s workers, named `acme/…` when served
//!      api.toml
//!      api-fedcba9876543210.wasm
//! ```
//!
//! A table names its code by upload (the module file the API wrote for it, by that name),
//! `builtin:NAME` or `oci://…`: never a path. Start-up and every reload refuse a table that
//! names anything else, a symbolic link, or a folder for a tenant that is not configured,
//! naming the file and the key, so a file put there by hand cannot reach out of the directory.
//! Start-up and every reload read the file and the directory together: one configuration,
//! checked as one, so a restart serves what was deployed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::grants::{Caps, Grants};
use super::owner::{Owner, valid_name};
use super::{ConfigError, RouteConfig, TenantConfig, WorkerConfig};

/// `[deploy]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeployConfig {
    /// The directory the admin API keeps deployed workers in (relative to this file). Unset:
    /// the API answers 404 `deploy_off`.
    pub dir: Option<PathBuf>,
    /// What workers deployed with the admin token may be granted. Default: nothing.
    pub grants: Grants,
    /// The most workers deployed with the admin token may ask for.
    pub caps: Caps,
}

impl DeployConfig {
    /// The directory, resolved against the configuration file's.
    pub(crate) fn resolved_dir(&self, base: &Path) -> Option<PathBuf> {
        self.dir.as_ref().map(|dir| base.join(dir))
    }
}

/// One deployed worker's file, `NAME.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployed {
    /// The worker: its module (the file the API wrote for it, `builtin:NAME` or `oci://…`),
    /// limits and grants, as a `[workers.NAME]` table has them.
    pub worker: WorkerConfig,
    /// Its routes. Each serves this worker: `worker` may be left out, and no other target is
    /// allowed.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

/// A deployed worker as read from the directory.
#[derive(Debug, Clone)]
pub struct Stored {
    /// Who deployed it.
    pub owner: Owner,
    /// Its own name (`api`; served as `acme/api` for tenant `acme`).
    pub name: String,
    /// Its file, parsed.
    pub deployed: Deployed,
    /// Its file's text.
    pub text: String,
    /// When its file was written: when it was deployed.
    pub at: Option<SystemTime>,
}

/// A deployed worker's file as the API writes it: its `[worker]` table (with `module`) and
/// its `[[routes]]`.
#[derive(Debug, Serialize)]
struct Written<'a> {
    worker: &'a toml::Table,
    routes: &'a [toml::Table],
}

/// The file name the API gives a module it writes for worker `name`: `NAME-<16 hex>.wasm`,
/// from the module's sha256 (`digest`, in hex).
pub(crate) fn module_file(name: &str, digest: &str) -> String {
    format!("{name}-{}.wasm", &digest[..16])
}

/// Whether `module` is a name the API gives a module of worker `name`.
pub(crate) fn is_module_file(name: &str, module: &str) -> bool {
    module
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|rest| rest.strip_suffix(".wasm"))
        .is_some_and(|hex| {
            hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        })
}

/// Reads every deployed worker of `dir`: the admin token's at its top, each tenant's in its
/// folder, keyed by the name each is served under. A missing directory is an empty one.
pub(super) fn read_dir(
    dir: &Path,
    tenants: &BTreeMap<String, TenantConfig>,
) -> Result<BTreeMap<String, Stored>, ConfigError> {
    let mut stored = BTreeMap::new();
    let folders = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(stored),
        Err(e) => return Err(ConfigError::at(&dir.display().to_string(), "deploy.dir", e)),
    };
    read_folder(dir, &Owner::Admin, &mut stored)?;
    for entry in folders.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path().display().to_string();
        if kind.is_symlink() {
            return Err(ConfigError::at(
                &path,
                "",
                "a symbolic link in the deploy directory: the API never makes one; remove it",
            ));
        }
        if !kind.is_dir() {
            continue;
        }
        if !tenants.contains_key(&name) {
            return Err(ConfigError::at(
                &path,
                "",
                format!(
                    "a folder of deployed workers for tenant `{name}`, which is not in [tenants]: configure the tenant, or remove the folder"
                ),
            ));
        }
        read_folder(&entry.path(), &Owner::Tenant(name), &mut stored)?;
    }
    Ok(stored)
}

/// Reads the `NAME.toml` files of one owner's folder into `stored`.
fn read_folder(
    folder: &Path,
    owner: &Owner,
    stored: &mut BTreeMap<String, Stored>,
) -> Result<(), ConfigError> {
    let entries = std::fs::read_dir(folder)
        .map_err(|e| ConfigError::at(&folder.display().to_string(), "deploy.dir", e))?;
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
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            return Err(ConfigError::at(
                &file,
                "",
                "is a symbolic link: the API never makes one; remove it",
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::at(&file, "", e))?;
        let deployed = parse(&text, &file)?;
        check_module(folder, name, &deployed.worker.module, &file)?;
        let at = entry.metadata().and_then(|m| m.modified()).ok();
        let name = name.to_owned();
        let record = Stored { owner: owner.clone(), name: name.clone(), deployed, text, at };
        stored.insert(owner.qualified(&name), record);
    }
    Ok(())
}

/// Refuses a stored table whose `module` is a path rather than the file the API wrote (a
/// regular file in the same folder, by the name the API gives it), `builtin:` or `oci://`.
fn check_module(folder: &Path, name: &str, module: &str, file: &str) -> Result<(), ConfigError> {
    if !super::names_a_file(module) {
        return Ok(());
    }
    if !is_module_file(name, module) {
        return Err(ConfigError::at(
            file,
            "worker.module",
            format!(
                "`{module}`: a deployed worker names its code by upload, `builtin:` or `oci://`, \
                 never a path (the API names an upload `{name}-<16 hex digits>.wasm`)"
            ),
        ));
    }
    match std::fs::symlink_metadata(folder.join(module)) {
        Ok(meta) if meta.file_type().is_file() => Ok(()),
        Ok(_) => {
            Err(ConfigError::at(file, "worker.module", format!("`{module}` is not a regular file")))
        }
        Err(e) => Err(ConfigError::at(file, "worker.module", format!("`{module}`: {e}"))),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_names_modules_and_knows_its_own_names() {
        let digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let file = module_file("hello", digest);
        assert_eq!(file, "hello-0123456789abcdef.wasm");
        assert!(is_module_file("hello", &file));
        for not in [
            "../victim.wasm",
            "/etc/passwd",
            "hello-0123456789abcdef.wasm/..",
            "other-0123456789abcdef.wasm",
            "hello-0123456789ABCDEF.wasm",
            "hello-0123.wasm",
            "sub/hello-0123456789abcdef.wasm",
        ] {
            assert!(!is_module_file("hello", not), "{not}");
        }
    }

    #[test]
    fn a_stored_table_that_names_a_path_or_a_link_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let deployed = dir.path().join("deployed");
        std::fs::create_dir_all(&deployed).unwrap();
        let write = |name: &str, module: &str| {
            std::fs::write(
                deployed.join(format!("{name}.toml")),
                format!("[worker]\nmodule = {module:?}\n"),
            )
            .unwrap();
        };
        let read = || read_dir(&deployed, &BTreeMap::new());
        write("v", "../victim.wasm");
        let e = read().unwrap_err();
        assert!(
            e.to_string().contains("v.toml: worker.module")
                && e.to_string().contains("never a path"),
            "{e}"
        );
        write("v", "/abs/victim.wasm");
        assert!(read().is_err());
        write("v", "builtin:echo-json");
        assert_eq!(read().unwrap()["v"].owner, Owner::Admin);
        std::fs::write(dir.path().join("victim.wasm"), b"\0asm\x01\0\0\0").unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("victim.wasm"),
            deployed.join("v-0123456789abcdef.wasm"),
        )
        .unwrap();
        write("v", "v-0123456789abcdef.wasm");
        assert!(read().unwrap_err().to_string().contains("not a regular file"));
        std::fs::create_dir(deployed.join("ghost")).unwrap();
        write("v", "builtin:echo-json");
        assert!(read().unwrap_err().to_string().contains("tenant `ghost`"));
    }
}
