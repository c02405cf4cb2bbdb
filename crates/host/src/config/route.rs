//! `[[routes]]`: which requests go where.

use serde::Deserialize;

use super::identity::IdentityConfig;
use super::split::SplitConfig;
use super::{Config, ConfigError};

/// `[[routes]]`: which requests go to which worker.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// A name for logs. Default `routes[N]`.
    pub name: Option<String>,
    /// Match only this host (case-insensitive; the port is ignored unless given here), or
    /// every name below a domain: `*.example.com`.
    pub host: Option<String>,
    /// Match exactly this path. One of `path` and `prefix` is required.
    pub path: Option<String>,
    /// Match this path and everything below it, segment-wise: `/api` matches `/api` and
    /// `/api/x`, not `/apix`; a prefix ending in `/` matches anything that starts with it.
    pub prefix: Option<String>,
    /// Match only these methods (upper case). Default: any.
    #[serde(default)]
    pub methods: Vec<String>,
    /// The worker that serves the request. One of `worker`, `upstream` and `respond` is
    /// required.
    pub worker: Option<String>,
    /// An upstream (`[upstreams.NAME]`) the request is proxied to as it came, with no
    /// worker: a plain reverse proxy through the upstream's pool.
    pub upstream: Option<String>,
    /// Several targets, chosen per request by rules, then by weight, sticky on a key
    /// (`[routes.split]`).
    pub split: Option<SplitConfig>,
    /// A fixed answer the gateway gives by itself, with no worker (and without reading the
    /// request body): a health or placeholder route, or a baseline for what the gateway
    /// costs without Wasm.
    pub respond: Option<RespondConfig>,
    /// A bearer token the gateway verifies before the target runs, and the claims it passes
    /// on as headers (`[routes.identity]`). Default: none.
    pub identity: Option<IdentityConfig>,
    /// The `[rate_limits.NAME]` policies a request must pass, in order, before anything serves
    /// it. Default: none.
    #[serde(default)]
    pub rate_limits: Vec<String>,
}

/// A route's fixed answer (`respond = { status = 200, body = "ok" }`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RespondConfig {
    /// The status, 200 to 599. Default 200.
    #[serde(default = "RespondConfig::default_status")]
    pub status: u16,
    /// The body. Default empty.
    #[serde(default)]
    pub body: String,
    /// The `content-type`. Default `text/plain; charset=utf-8` (none for an empty body).
    pub content_type: Option<String>,
}

impl RespondConfig {
    fn default_status() -> u16 {
        200
    }
}

/// Checks the match, the target and the methods of `routes[i]`.
pub(super) fn validate(
    i: usize,
    route: &RouteConfig,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at = |key: String, message: &str| Err(ConfigError::at(file, key, message));
    let key = |field: &str| format!("routes[{i}].{field}");
    match (&route.path, &route.prefix) {
        (Some(_), Some(_)) | (None, None) => {
            return at(format!("routes[{i}]"), "needs exactly one of `path` and `prefix`");
        }
        (Some(p), None) | (None, Some(p)) if !p.starts_with('/') => {
            let field = if route.path.is_some() { "path" } else { "prefix" };
            return at(key(field), "must start with `/`");
        }
        _ => {}
    }
    let targets = [
        route.worker.is_some(),
        route.upstream.is_some(),
        route.respond.is_some(),
        route.split.is_some(),
    ];
    if targets.iter().filter(|t| **t).count() != 1 {
        return at(
            format!("routes[{i}]"),
            "needs exactly one of `worker`, `upstream`, `split` and `respond`",
        );
    }
    if let Some(split) = &route.split {
        super::split::validate(i, split, config, file)?;
    }
    if let Some(identity) = &route.identity {
        super::identity::validate(i, identity, config, file)?;
    }
    super::rate_limit::validate_route(
        i,
        &route.rate_limits,
        route.identity.is_some(),
        config,
        file,
    )?;
    if let Some(upstream) = &route.upstream
        && !config.upstreams.contains_key(upstream)
    {
        return Err(ConfigError::at(
            file,
            key("upstream"),
            format!("no upstream named `{upstream}` in [upstreams]"),
        ));
    }
    match (&route.worker, &route.respond) {
        (Some(worker), None) if !config.workers.contains_key(worker) => {
            return Err(ConfigError::at(
                file,
                key("worker"),
                format!("no worker named `{worker}` in [workers]"),
            ));
        }
        (None, Some(respond)) if !(200..=599).contains(&respond.status) => {
            return at(key("respond.status"), "must be 200 to 599");
        }
        (None, Some(respond))
            if respond
                .content_type
                .as_ref()
                .is_some_and(|t| http::HeaderValue::from_str(t).is_err()) =>
        {
            return at(key("respond.content_type"), "is not a valid header value");
        }
        _ => {}
    }
    for method in &route.methods {
        if http::Method::from_bytes(method.as_bytes()).is_err() {
            return Err(ConfigError::at(
                file,
                key("methods"),
                format!("`{method}` is not a method"),
            ));
        }
        if method.to_ascii_uppercase() != *method {
            return Err(ConfigError::at(
                file,
                key("methods"),
                format!("`{method}` must be upper case (methods are case-sensitive)"),
            ));
        }
    }
    if let Err(error) = crate::route::host_pattern::HostPattern::parse(route.host.as_deref()) {
        return Err(ConfigError::caused(file, key("host"), error));
    }
    Ok(())
}
