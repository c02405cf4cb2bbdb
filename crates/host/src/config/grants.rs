//! What a deployer may ask for: the capabilities its workers may be granted (`grants`) and
//! the most of each limit and count (`caps`). The admin token's are `[deploy.grants]` and
//! `[deploy.caps]`; a tenant's are `[tenants.NAME.grants]` and `[tenants.NAME.caps]`.
//!
//! Nothing is ambient: a grant left out is none, so a deployed worker that asks for a KV
//! namespace, an upstream, an origin, a secret, a file, a registry or the image capability
//! that its deployer was not granted is refused with 422, naming the key. The caps default to
//! what a worker on a shared node may safely ask for (docs/deploy.md#tenants).
//!
//! ```text
//!  deployed worker ── kv, upstreams ⊆ grants ── fetch ⊆ grants.fetch (patterns) ── jwt keys:
//!    secret_env ∈ grants.secrets, *_file ∈ grants.files, jwks_url ⊆ grants.fetch ── image ≤
//!    grants.image ── oci:// ⊆ grants.registries ── limits ≤ caps ── routes ≤ caps.routes
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use edgegate_runtime::ByteSize;
use serde::Deserialize;

use super::{Config, ConfigError, ImageConfig, JwtConfig, RouteConfig, WorkerConfig, duration};
use crate::capability::origin::Origin;
use crate::capability::reach::Reach;

/// The capabilities a deployer's workers may be granted.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Grants {
    /// KV namespaces (`[kv]`) its workers may use.
    pub kv: Vec<String>,
    /// Upstreams (`[upstreams]`) its workers may forward to and fetch from.
    pub upstreams: Vec<String>,
    /// Origins its workers may fetch from: `https://api.example.com`, every name below a
    /// domain (`https://*.example.com`), or any (`https://*`). An origin granted by a wildcard
    /// reaches public addresses only; one granted by name reaches what the name resolves to,
    /// except this host's own (loopback, link-local, the admin listener), unless the grant is
    /// the address itself (`http://127.0.0.1:8081`, `http://localhost:8081`).
    pub fetch: Vec<String>,
    /// Environment variables its workers' JWT keys may name (`secret_env`).
    pub secrets: Vec<String>,
    /// Files its workers' JWT keys may name (`secret_file`, `pem_file`, `jwk_file`,
    /// `jwks_file`, `ca_file`), written exactly as here (relative to the configuration file).
    pub files: Vec<PathBuf>,
    /// Where its workers' `oci://` modules may come from: a registry (`registry.example:5000`)
    /// or a repository path in one (`registry.example/team/`), matched by whole segments.
    pub registries: Vec<String>,
    /// Values every one of its workers reads with `config_get`, which their own `config` may
    /// not set.
    pub config: BTreeMap<String, String>,
    /// The image capability, and the most its workers' image limits may be: `true` (the
    /// default limits) or a table of them. Default: not granted.
    #[serde(deserialize_with = "super::image::grant")]
    pub image: Option<ImageConfig>,
}

/// The most a deployer may ask for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Caps {
    /// Workers it may have deployed at once. Default 1000.
    pub workers: usize,
    /// Routes one worker may have. Default 16.
    pub routes: usize,
    /// The largest module, uploaded or pulled from a registry. Default 16MiB.
    pub module: ByteSize,
    /// Instance slots all its workers may hold at once, together; past it a request waits up
    /// to `server.queue_timeout`, then gets 503. Default: a quarter of
    /// `server.max_concurrency` for a tenant; none for the admin token.
    pub concurrency: Option<u32>,
    /// The largest `limits.memory`. Default 128MiB.
    pub memory: ByteSize,
    /// The largest `limits.cpu`. Default 50ms.
    #[serde(deserialize_with = "duration")]
    pub cpu: Duration,
    /// The largest `limits.deadline`. Default 30s.
    #[serde(deserialize_with = "duration")]
    pub deadline: Duration,
    /// The largest `limits.request_body`. Default 16MiB.
    pub request_body: ByteSize,
    /// The largest `limits.response_body`. Default 16MiB.
    pub response_body: ByteSize,
    /// The largest `limits.hostcalls`. Default 10000.
    pub hostcalls: u32,
    /// The largest `limits.kv_ops`. Default 1000.
    pub kv_ops: u32,
    /// The largest `limits.kv_value`. Default 1MiB.
    pub kv_value: ByteSize,
    /// The largest `limits.subrequests`. Default 64.
    pub subrequests: u32,
    /// The largest `limits.subrequest_body`. Default 16MiB.
    pub subrequest_body: ByteSize,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            workers: 1000,
            routes: 16,
            module: ByteSize(16 << 20),
            concurrency: None,
            memory: ByteSize(128 << 20),
            cpu: Duration::from_millis(50),
            deadline: Duration::from_secs(30),
            request_body: ByteSize(16 << 20),
            response_body: ByteSize(16 << 20),
            hostcalls: 10_000,
            kv_ops: 1000,
            kv_value: ByteSize(1 << 20),
            subrequests: 64,
            subrequest_body: ByteSize(16 << 20),
        }
    }
}

impl Grants {
    /// Where a worker's fetches to `origin` may connect, if `origin` is granted: anywhere
    /// when a grant names the same address literally (an IP or `localhost`); away from this
    /// host when a grant names the same host; public addresses only when only a wildcard
    /// covers it.
    pub(crate) fn reach(&self, origin: &Origin) -> Option<Reach> {
        let granted: Vec<Origin> =
            self.fetch.iter().filter_map(|g| Origin::parse(g).ok()).collect();
        if origin.is_exact() && granted.iter().any(|g| g == origin) {
            let host = origin.exact_host().unwrap_or_default();
            let literal = host == "localhost"
                || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok();
            return Some(if literal { Reach::Anywhere } else { Reach::Away });
        }
        granted.iter().any(|g| origin.within(g)).then_some(Reach::Public)
    }

    /// Whether `reference` (`oci://HOST/REPO:TAG`) lies in a granted registry or repository.
    fn registry(&self, reference: &str) -> bool {
        let Ok(parsed) = crate::registry::parse(reference) else { return false };
        let path = format!("{}/{}", parsed.registry(), parsed.repository());
        self.registries.iter().any(|granted| {
            let granted = granted.trim_end_matches('/');
            path.strip_prefix(granted).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

/// Checks `grants` and `caps` (at `at`: `deploy` or `tenants.NAME`) against the rest of the
/// configuration: what they grant exists.
pub(super) fn validate(
    grants: &Grants,
    caps: &Caps,
    at: &str,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let error = |key: String, message: String| Err(ConfigError::at(file, key, message));
    for (i, ns) in grants.kv.iter().enumerate() {
        if !config.kv.contains_key(ns) {
            return error(format!("{at}.grants.kv[{i}]"), format!("no `[kv.{ns}]` is configured"));
        }
    }
    for (i, upstream) in grants.upstreams.iter().enumerate() {
        if !config.upstreams.contains_key(upstream) {
            return error(
                format!("{at}.grants.upstreams[{i}]"),
                format!("no `[upstreams.{upstream}]` is configured"),
            );
        }
    }
    for (i, origin) in grants.fetch.iter().enumerate() {
        if let Err(e) = Origin::parse(origin) {
            return Err(ConfigError::caused(file, format!("{at}.grants.fetch[{i}]"), e));
        }
    }
    for (i, registry) in grants.registries.iter().enumerate() {
        let host = registry.split('/').next().unwrap_or_default();
        if host.is_empty() || registry.contains("://") || registry.contains(['@', ' ']) {
            return error(
                format!("{at}.grants.registries[{i}]"),
                format!("`{registry}` must be a registry (host[:port]) and maybe a path in it"),
            );
        }
    }
    if let Some(key) = grants.config.keys().find(|k| k.starts_with("jwt.")) {
        return error(
            format!("{at}.grants.config.{key}"),
            "`jwt.*` values come from a worker's [jwt] table".into(),
        );
    }
    let slots = config.server.max_concurrency;
    if caps.concurrency.is_some_and(|c| c == 0 || c > slots) {
        return error(
            format!("{at}.caps.concurrency"),
            format!("must be from 1 to server.max_concurrency ({slots})"),
        );
    }
    for (key, zero) in [
        ("workers", caps.workers == 0),
        ("routes", caps.routes == 0),
        ("cpu", caps.cpu.is_zero()),
        ("deadline", caps.deadline.is_zero()),
    ] {
        if zero {
            return error(format!("{at}.caps.{key}"), "must be more than zero".into());
        }
    }
    Ok(())
}

/// One deployed worker, its table and its routes, checked against what its deployer may ask
/// for. `file` is the worker's file; `by` says whose grants (`[deploy]`, `[tenants.NAME]`).
pub(super) struct Admission<'a> {
    pub(super) grants: &'a Grants,
    pub(super) caps: &'a Caps,
    pub(super) by: &'a str,
    pub(super) file: &'a str,
}

impl Admission<'_> {
    fn refuse(&self, key: impl Into<String>, message: impl std::fmt::Display) -> ConfigError {
        ConfigError::at(self.file, key, format!("{message} ({})", self.by))
    }

    /// Checks the worker's module, grants and limits, and its routes' count and keys.
    pub(super) fn admit(
        &self,
        worker: &WorkerConfig,
        routes: &[RouteConfig],
    ) -> Result<(), ConfigError> {
        let (grants, caps) = (self.grants, self.caps);
        if worker.module.starts_with(crate::registry::SCHEME) && !grants.registry(&worker.module) {
            return Err(self.refuse(
                "worker.module",
                format!(
                    "`{}` is not in a registry it may pull from (grants.registries)",
                    worker.module
                ),
            ));
        }
        let not_granted = |key: String, what: &str, name: &str, list: &str| {
            Err(self.refuse(key, format!("{what} `{name}` is not granted (grants.{list})")))
        };
        for (i, ns) in worker.kv.iter().enumerate() {
            if !grants.kv.contains(ns) {
                return not_granted(format!("worker.kv[{i}]"), "KV namespace", ns, "kv");
            }
        }
        for (i, upstream) in worker.upstreams.iter().enumerate() {
            if !grants.upstreams.contains(upstream) {
                return not_granted(
                    format!("worker.upstreams[{i}]"),
                    "upstream",
                    upstream,
                    "upstreams",
                );
            }
        }
        for (i, origin) in worker.fetch.iter().enumerate() {
            let granted = Origin::parse(origin).ok().and_then(|o| grants.reach(&o));
            if granted.is_none() {
                return not_granted(format!("worker.fetch[{i}]"), "origin", origin, "fetch");
            }
        }
        if let Some(key) = worker.config.keys().find(|k| grants.config.contains_key(*k)) {
            return Err(self.refuse(
                format!("worker.config.{key}"),
                "is set for every worker by its grants (grants.config)",
            ));
        }
        if let Some(jwt) = &worker.jwt {
            self.keys(jwt, "worker.jwt")?;
        }
        if let Some(image) = &worker.image {
            let Some(most) = &grants.image else {
                return Err(self
                    .refuse("worker.image", "the image capability is not granted (grants.image)"));
            };
            for (key, over) in [
                ("max_pixels", image.max_pixels > most.max_pixels),
                ("max_output", image.max_output > most.max_output),
                ("max_scans", image.max_scans > most.max_scans),
                ("memory", image.memory > most.memory),
            ] {
                if over {
                    return Err(self.refuse(
                        format!("worker.image.{key}"),
                        "is more than grants.image allows",
                    ));
                }
            }
        }
        self.limits(worker)?;
        if routes.len() > caps.routes {
            return Err(self.refuse(
                "routes",
                format!("{} routes, more than caps.routes ({})", routes.len(), caps.routes),
            ));
        }
        for (i, route) in routes.iter().enumerate() {
            if let Some(jwt) = route.identity.as_ref().and_then(|identity| identity.jwt.as_ref()) {
                self.keys(jwt, &format!("routes[{i}].identity.jwt"))?;
            }
        }
        Ok(())
    }

    /// The worker's limits and its share, each within its cap.
    fn limits(&self, worker: &WorkerConfig) -> Result<(), ConfigError> {
        let caps = self.caps;
        let l = &worker.limits.guest;
        let over = [
            ("memory", l.memory > caps.memory.bytes(), caps.memory.to_string()),
            ("cpu", l.cpu > caps.cpu, format!("{:?}", caps.cpu)),
            ("deadline", l.deadline > caps.deadline, format!("{:?}", caps.deadline)),
            (
                "request_body",
                worker.limits.request_body.bytes() > caps.request_body.bytes(),
                caps.request_body.to_string(),
            ),
            (
                "response_body",
                l.response_body > caps.response_body.bytes(),
                caps.response_body.to_string(),
            ),
            ("hostcalls", l.hostcalls > caps.hostcalls, caps.hostcalls.to_string()),
            ("kv_ops", l.kv_ops > caps.kv_ops, caps.kv_ops.to_string()),
            ("kv_value", l.kv_value > caps.kv_value.bytes(), caps.kv_value.to_string()),
            ("subrequests", l.subrequests > caps.subrequests, caps.subrequests.to_string()),
            (
                "subrequest_body",
                l.subrequest_body > caps.subrequest_body.bytes(),
                caps.subrequest_body.to_string(),
            ),
        ];
        if let Some((key, _, most)) = over.into_iter().find(|(_, over, _)| *over) {
            return Err(self.refuse(
                format!("worker.limits.{key}"),
                format!("is more than caps.{key} ({most})"),
            ));
        }
        if let (Some(share), Some(most)) = (worker.max_concurrency, caps.concurrency)
            && share > most
        {
            return Err(self.refuse(
                "worker.max_concurrency",
                format!("is more than caps.concurrency ({most})"),
            ));
        }
        Ok(())
    }

    /// A token policy's key sources: each secret, file and URL granted.
    fn keys(&self, jwt: &JwtConfig, at: &str) -> Result<(), ConfigError> {
        let grants = self.grants;
        for (i, source) in jwt.keys.iter().enumerate() {
            let at = format!("{at}.keys[{i}]");
            if let Some(var) = &source.secret_env
                && !grants.secrets.contains(var)
            {
                return Err(self.refuse(
                    format!("{at}.secret_env"),
                    format!("environment variable `{var}` is not granted (grants.secrets)"),
                ));
            }
            let files = [
                ("secret_file", &source.secret_file),
                ("pem_file", &source.pem_file),
                ("jwk_file", &source.jwk_file),
                ("jwks_file", &source.jwks_file),
                ("ca_file", &source.ca_file),
            ];
            for (key, path) in files {
                if let Some(path) = path
                    && !grants.files.contains(path)
                {
                    return Err(self.refuse(
                        format!("{at}.{key}"),
                        format!("file `{}` is not granted (grants.files)", path.display()),
                    ));
                }
            }
            if let Some(url) = &source.jwks_url {
                let origin = url.parse::<http::Uri>().ok().and_then(|uri| Origin::of(&uri));
                if origin.and_then(|o| grants.reach(&o)).is_none() {
                    return Err(self.refuse(
                        format!("{at}.jwks_url"),
                        format!("`{url}`'s origin is not granted (grants.fetch)"),
                    ));
                }
            }
        }
        Ok(())
    }
}
