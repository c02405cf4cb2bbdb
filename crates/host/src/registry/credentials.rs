//! Registry credentials: [`USERNAME_ENV`] and [`PASSWORD_ENV`] for the one registry
//! [`HOST_ENV`] names, else the docker `config.json` (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`); never the configuration.
//!
//! Credentials go only to the registry they were given for: the environment's to
//! [`HOST_ENV`]'s (a user name and password without it are an error, never sent to whatever
//! registry a reference names), a `config.json`'s to the registry its entry is for. A
//! reference to any other registry is resolved anonymously.
//!
//! A `config.json` is read as docker reads it, by the `docker_credential` crate (the one `wkg`
//! uses): the registry's `credHelpers` entry, else its `auths` entry (`auth`, or `username`
//! and `password`; a key may carry `https://`), else the `credsStore`. A helper is the
//! program `docker-credential-NAME`, asked with `get`. A registry it has nothing for, like one
//! the file does not name, is asked anonymously.

use std::collections::HashMap;
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::Arc;

use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::secrets::RegistryAuth;
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use super::RegistryError;

/// The user name for the registry [`HOST_ENV`] names (with [`PASSWORD_ENV`], or neither).
pub const USERNAME_ENV: &str = "EDGEGATE_REGISTRY_USERNAME";
/// See [`USERNAME_ENV`].
pub const PASSWORD_ENV: &str = "EDGEGATE_REGISTRY_PASSWORD";
/// The registry (`host[:port]`, as references name it) that [`USERNAME_ENV`] and
/// [`PASSWORD_ENV`] are for; required with them.
pub const HOST_ENV: &str = "EDGEGATE_REGISTRY_HOST";

/// Credentials read at most once per registry, off the runtime's threads: made anew for each
/// resolution of the workers' references (a rotated file or Secret is read at the next
/// reload), as a helper is a process and one pass may resolve thousands of references on one
/// registry; and for a push.
#[derive(Default)]
pub struct Credentials(Mutex<HashMap<String, Arc<OnceCell<Read>>>>);

/// One registry's credentials as read, or why they could not be.
type Read = Result<RegistryAuth, String>;

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.0.lock().len();
        f.debug_struct("Credentials").field("registries", &count).finish()
    }
}

impl Credentials {
    /// `registry`'s (`host[:port]`) credentials: read the first time, the same answer after.
    pub async fn get(&self, registry: &str) -> Result<RegistryAuth, RegistryError> {
        let cell = {
            let mut read = self.0.lock();
            read.entry(registry.to_owned()).or_default().clone()
        };
        let registry = registry.to_owned();
        let read = cell.get_or_init(|| async move {
            tokio::task::spawn_blocking(move || read(&registry))
                .await
                .unwrap_or_else(|e| Err(format!("reading them failed: {e}")))
        });
        read.await.clone().map_err(RegistryError::Credentials)
    }
}

fn read(registry: &str) -> Read {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(auth) = from_env(registry, env(HOST_ENV), env(USERNAME_ENV), env(PASSWORD_ENV))? {
        return Ok(auth);
    }
    let Some(file) = docker_config() else { return Ok(RegistryAuth::Anonymous) };
    // No file: anonymous, as docker. A file that cannot be read or parsed is an error.
    let opened = match std::fs::File::open(&file) {
        Ok(opened) => opened,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => return Err(format!("{}: {e}", file.display())),
    };
    from_docker_config(BufReader::new(opened), registry)
        .map_err(|why| format!("{}: {why}", file.display()))
}

/// The environment's credentials if they are `registry`'s: `Some` only when `host` names it
/// (case-insensitively). A user name and password that name no registry are an error, so
/// that they are never sent to whichever registry a reference happens to name.
fn from_env(
    registry: &str,
    host: Option<String>,
    user: Option<String>,
    password: Option<String>,
) -> Result<Option<RegistryAuth>, String> {
    match (user, password) {
        (Some(user), Some(password)) => match host {
            Some(host) if host.eq_ignore_ascii_case(registry) => {
                Ok(Some(RegistryAuth::Basic(user, password)))
            }
            Some(_) => Ok(None),
            None => Err(format!(
                "{USERNAME_ENV} and {PASSWORD_ENV} are set, but not {HOST_ENV}: set it to the \
                 registry (host[:port]) they are for; they are sent to no other"
            )),
        },
        (None, None) => Ok(None),
        _ => Err(format!("set both {USERNAME_ENV} and {PASSWORD_ENV}, or neither")),
    }
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn docker_config() -> Option<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = env("DOCKER_CONFIG").or_else(|| Some(env("HOME")?.join(".docker")))?;
    Some(dir.join("config.json"))
}

/// What a docker `config.json` holds for `registry`.
fn from_docker_config(json: impl std::io::Read, registry: &str) -> Result<RegistryAuth, String> {
    match docker_credential::get_credential_from_reader(json, registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        // An OAuth refresh token, to trade at the registry's token service: not a bearer token.
        Ok(DockerCredential::IdentityToken(_)) => Err(format!(
            "its entry for {registry} is an identity token, which edgegate cannot use: log in \
             with a user name and password, or set {USERNAME_ENV} and {PASSWORD_ENV}"
        )),
        Err(CredentialRetrievalError::NoCredentialConfigured) => Ok(RegistryAuth::Anonymous),
        // What docker's helpers say of a registry they hold nothing for.
        Err(CredentialRetrievalError::HelperFailure { stdout, .. })
            if stdout.contains("credentials not found") =>
        {
            Ok(RegistryAuth::Anonymous)
        }
        Err(CredentialRetrievalError::HelperFailure { helper, stdout, stderr }) => {
            let said = if stderr.trim().is_empty() { stdout } else { stderr };
            Err(format!("`{helper} get` failed: {}", said.trim()))
        }
        Err(CredentialRetrievalError::HelperCommunicationError) => Err(format!(
            "the credential helper it names for {registry} (a program docker-credential-NAME \
             on PATH) could not be run"
        )),
        Err(CredentialRetrievalError::ConfigReadError) => Err("not a docker config.json".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str, registry: &str) -> Result<RegistryAuth, String> {
        from_docker_config(json.as_bytes(), registry)
    }

    #[test]
    fn a_docker_config_gives_the_registry_s_credentials_as_docker_reads_them() {
        let basic = |user: &str, password: &str| RegistryAuth::Basic(user.into(), password.into());
        // base64 of "ada:s3cret"
        let auths = r#"{"auths":{"registry.example:5000":{"auth":"YWRhOnMzY3JldA=="}}}"#;
        assert_eq!(read(auths, "registry.example:5000"), Ok(basic("ada", "s3cret")));
        assert_eq!(read(auths, "other:5000"), Ok(RegistryAuth::Anonymous));
        // A key with a scheme and a path, as older docker versions wrote them.
        let scheme = r#"{"auths":{"https://registry.example/v1/":{"auth":"YWRhOnMzY3JldA=="}}}"#;
        assert_eq!(read(scheme, "registry.example"), Ok(basic("ada", "s3cret")));
        // The user name and password fields alone, as some tools write a Secret.
        let fields = r#"{"auths":{"r.example":{"username":"ada","password":"p"}}}"#;
        assert_eq!(read(fields, "r.example"), Ok(basic("ada", "p")));
        assert_eq!(read("{}", "r.example"), Ok(RegistryAuth::Anonymous));
    }

    #[test]
    fn the_environment_s_credentials_go_only_to_the_registry_they_name() {
        let some = |s: &str| Some(s.to_owned());
        let basic = Some(RegistryAuth::Basic("ada".into(), "pw".into()));
        let env = |registry: &str, host: Option<String>| {
            from_env(registry, host, some("ada"), some("pw"))
        };
        assert_eq!(env("r.example:5000", some("R.example:5000")), Ok(basic));
        assert_eq!(env("other.example", some("r.example:5000")), Ok(None), "anonymous elsewhere");
        assert!(env("r.example", None).unwrap_err().contains(HOST_ENV), "no registry named");
        assert!(from_env("r", some("r"), some("ada"), None).is_err(), "half of a pair");
        assert_eq!(from_env("r", some("r"), None, None), Ok(None));
    }

    #[test]
    fn what_edgegate_cannot_use_is_an_error_that_says_why() {
        let token = r#"{"auths":{"r.example":{"identitytoken":"refresh"}}}"#;
        assert!(read(token, "r.example").unwrap_err().contains("identity token"));
        let broken = r#"{"auths":{"r.example":{"auth":"!!"}}}"#;
        assert!(read(broken, "r.example").is_err());
        assert_eq!(read("{", "r.example").unwrap_err(), "not a docker config.json");
        let helper = r#"{"credHelpers":{"r.example":"edgegate-test-no-such-helper"}}"#;
        assert!(read(helper, "r.example").unwrap_err().contains("could not be run"));
    }
}
