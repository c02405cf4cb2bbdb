//! `[tenants.NAME]`: the teams a node serves, each a boundary. A tenant deploys workers
//! through the admin API with its own token, only Wasm, only onto the hosts and path prefixes
//! it owns, only with the capabilities its grants name and within its caps; it sees and
//! changes only its own workers, whose names are its own (`acme/api` beside `shop/api`).
//!
//! ```text
//!  [tenants.acme]  token ─▶ PUT /workers/api ─▶ acme/api, its routes inside
//!                  hosts × prefixes (acme.example, *.acme.example) × (/)
//!                  grants (kv, upstreams, fetch, secrets, files, registries, config, image)
//!                  caps (workers, routes, module, concurrency, limits)
//! ```
//!
//! Ownership is checked when the file is read: two tenants, or a tenant and the file's routes,
//! may not own traffic in common, by the router's own precedence (a longer path under another's
//! prefix, one host inside another's wildcard: crate::route::ownership). A tenant's hosts get
//! tables of their own in the router, routes or not, so their requests never fall to the
//! file's host-less routes, and the file's never to the tenant.

use serde::Deserialize;

use super::grants::{Caps, Grants};
use super::owner::Owner;
use super::{Config, ConfigError, Loaded};
use crate::route::host_pattern::HostPattern;
use crate::route::ownership::{Claim, Claims, PathClaim};

/// `[tenants.NAME]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// The sha256 of its deploy token, in hex (`printf %s "$TOKEN" | sha256sum`). One of
    /// `token_sha256` and `token_env`.
    pub token_sha256: Option<String>,
    /// The environment variable holding its deploy token (at least 32 characters).
    pub token_env: Option<String>,
    /// The hosts it owns: `acme.example` (any port) or `*.acme.example` (every name below).
    /// None: it owns its `prefixes` in the table of requests whose host no table takes.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The path prefixes it owns on those hosts. Default `["/"]`.
    #[serde(default = "root")]
    pub prefixes: Vec<String>,
    /// The capabilities its workers may be granted.
    #[serde(default)]
    pub grants: Grants,
    /// The most its workers may ask for.
    #[serde(default)]
    pub caps: Caps,
}

fn root() -> Vec<String> {
    vec!["/".to_owned()]
}

impl TenantConfig {
    /// The hosts it owns, parsed (validation made sure they parse); `Any` if none.
    pub(crate) fn host_patterns(&self) -> Vec<HostPattern> {
        if self.hosts.is_empty() {
            return vec![HostPattern::Any];
        }
        self.hosts.iter().filter_map(|h| HostPattern::parse(Some(h)).ok()).collect()
    }

    /// Whether a route with `host` and `path` lies inside what it owns.
    pub(crate) fn owns(&self, host: &HostPattern, path: &PathClaim) -> bool {
        self.host_patterns().iter().any(|owned| host.within(owned))
            && self.prefixes.iter().any(|prefix| path.within(prefix))
    }

    /// The instance slots all its workers may hold at once.
    pub(crate) fn concurrency(&self, config: &Config) -> u32 {
        self.caps.concurrency.unwrap_or((config.server.max_concurrency / 4).max(1))
    }

    /// Its deploy token's sha256: `token_sha256`, or the hash of `token_env`'s value, which
    /// must be a secret (see [`super::token`]).
    pub(crate) fn token_hash(&self, name: &str, loaded: &Loaded) -> Result<[u8; 32], ConfigError> {
        let at = |field: &str| format!("tenants.{name}.{field}");
        match (&self.token_sha256, &self.token_env) {
            (Some(hex), None) => parse_sha256(hex).ok_or_else(|| {
                ConfigError::at(&loaded.file, at("token_sha256"), "must be 64 hex digits")
            }),
            (None, Some(var)) => {
                let value = loaded.env_var(var).ok_or_else(|| {
                    ConfigError::at(&loaded.file, at("token_env"), format!("`{var}` is not set"))
                })?;
                super::token::strong_enough(&value).map_err(|why| {
                    ConfigError::at(&loaded.file, at("token_env"), format!("`{var}` {why}"))
                })?;
                Ok(super::token::sha256(value.as_bytes()))
            }
            _ => Err(ConfigError::at(
                &loaded.file,
                format!("tenants.{name}"),
                "needs exactly one of `token_sha256` and `token_env`",
            )),
        }
    }
}

/// 64 hex digits as 32 bytes.
fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(bytes)
}

/// Checks `tenants.NAME`: its name, its token's form, its hosts and prefixes, its grants and
/// caps.
pub(super) fn validate(
    name: &str,
    tenant: &TenantConfig,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at = format!("tenants.{name}");
    let error = |key: String, message: String| Err(ConfigError::at(file, key, message));
    if !super::owner::valid_name(name) {
        return error(
            at,
            "a tenant's name is 1 to 64 of a-z, 0-9, `-` and `_`, starting with a letter or digit"
                .into(),
        );
    }
    match (&tenant.token_sha256, &tenant.token_env) {
        (Some(hex), None) if parse_sha256(hex).is_none() => {
            return error(format!("{at}.token_sha256"), "must be 64 hex digits".into());
        }
        (Some(_), None) | (None, Some(_)) => {}
        _ => return error(at, "needs exactly one of `token_sha256` and `token_env`".into()),
    }
    for (i, host) in tenant.hosts.iter().enumerate() {
        match HostPattern::parse(Some(host)) {
            Ok(HostPattern::Exact(h)) if h.contains(':') && !h.starts_with('[') => {
                return error(
                    format!("{at}.hosts[{i}]"),
                    "a tenant owns a host on every port: no port".into(),
                );
            }
            Ok(_) => {}
            Err(e) => return Err(ConfigError::caused(file, format!("{at}.hosts[{i}]"), e)),
        }
    }
    if tenant.prefixes.is_empty() {
        return error(format!("{at}.prefixes"), "needs at least one prefix (`/` for all)".into());
    }
    if let Some((i, _)) = tenant.prefixes.iter().enumerate().find(|(_, p)| !p.starts_with('/')) {
        return error(format!("{at}.prefixes[{i}]"), "must start with `/`".into());
    }
    super::grants::validate(&tenant.grants, &tenant.caps, &at, config, file)
}

/// Who owns which traffic, from the file alone: its routes, and each tenant's hosts ×
/// prefixes. Refuses two owners with traffic in common, naming both.
pub(crate) fn claims(config: &Config, file: &str) -> Result<Claims<Owner>, ConfigError> {
    let mut claims = Claims::default();
    for route in &config.routes {
        let (Ok(host), Some(path)) = (
            HostPattern::parse(route.host.as_deref()),
            PathClaim::of(route.path.as_deref(), route.prefix.as_deref()),
        ) else {
            continue;
        };
        claims.add(Claim { host, path, owner: Owner::File });
    }
    for (name, tenant) in config.tenants.iter() {
        let owner = Owner::Tenant(name.clone());
        for (h, host) in tenant.host_patterns().into_iter().enumerate() {
            for (p, prefix) in tenant.prefixes.iter().enumerate() {
                let path = PathClaim::Prefix(prefix.clone());
                if let Some(clash) = claims.clash(&host, &path, &owner) {
                    let key = if tenant.hosts.is_empty() {
                        format!("tenants.{name}.prefixes[{p}]")
                    } else {
                        format!("tenants.{name}.hosts[{h}]")
                    };
                    return Err(ConfigError::at(
                        file,
                        key,
                        format!(
                            "{host}, {path} shares requests with {} ({}, {}): two owners may not own the same traffic",
                            clash.owner, clash.host, clash.path
                        ),
                    ));
                }
                claims.add(Claim { host: host.clone(), path, owner: owner.clone() });
            }
        }
    }
    Ok(claims)
}

/// The hosts tenants own: the router keeps a table for each.
pub(crate) fn reserved_hosts(config: &Config) -> Vec<HostPattern> {
    let hosts = config.tenants.values().filter(|t| !t.hosts.is_empty());
    hosts.flat_map(TenantConfig::host_patterns).collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::Loaded;

    const HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    fn refused(text: &str) -> Option<String> {
        Loaded::from_text(text, "t.toml", PathBuf::new()).err().map(|e| e.to_string())
    }

    fn tenant(name: &str, lines: &str) -> String {
        format!("[tenants.{name}]\ntoken_sha256 = \"{HASH}\"\n{lines}\n")
    }

    const CATCH_ALL: &str =
        "[workers.w]\nmodule = \"builtin:echo-json\"\n[[routes]]\nprefix = \"/\"\nworker = \"w\"\n";

    #[test]
    fn tenants_that_would_share_traffic_are_refused_naming_both() {
        let acme = tenant("acme", "hosts = [\"*.acme.example\"]");
        let shop = tenant("shop", "hosts = [\"api.acme.example\"]");
        let e = refused(&format!("{acme}{shop}")).expect("a host inside another's wildcard");
        assert!(e.contains("tenants.shop.hosts[0]") && e.contains("tenant `acme`"), "{e}");
        let a = tenant("a", "prefixes = [\"/team/\"]");
        let b = tenant("b", "prefixes = [\"/team/b/\"]");
        let e = refused(&format!("{a}{b}")).expect("a longer prefix under another's");
        assert!(e.contains("tenants.b.prefixes[0]"), "{e}");
        let apart = format!(
            "{}{}",
            tenant("a", "prefixes = [\"/a/\"]"),
            tenant("b", "prefixes = [\"/b/\"]")
        );
        assert_eq!(refused(&apart), None);
    }

    #[test]
    fn a_tenant_may_not_own_what_the_file_s_routes_serve() {
        // The file's catch-all serves every path of the table of requests with no host of
        // their own: a tenant that owns a prefix there would take part of it.
        let e = refused(&format!("{CATCH_ALL}{}", tenant("t", "prefixes = [\"/t/\"]"))).unwrap();
        assert!(e.contains("the configuration file"), "{e}");
        // A host of its own has its own table, routes or not: the catch-all never saw it.
        assert_eq!(
            refused(&format!("{CATCH_ALL}{}", tenant("t", "hosts = [\"t.example\"]"))),
            None
        );
        let named =
            CATCH_ALL.replace("prefix = \"/\"", "host = \"t.example\"\nprefix = \"/login\"");
        let e = refused(&format!("{named}{}", tenant("t", "hosts = [\"t.example\"]"))).unwrap();
        assert!(e.contains("tenants.t.hosts[0]"), "{e}");
    }

    #[test]
    fn a_tenant_s_token_and_hosts_are_checked() {
        let bad = "[tenants.t]\ntoken_sha256 = \"abc\"\n";
        assert!(refused(bad).unwrap().contains("64 hex digits"));
        assert!(refused("[tenants.t]\n").unwrap().contains("exactly one of"));
        let port = tenant("t", "hosts = [\"t.example:8443\"]");
        assert!(refused(&port).unwrap().contains("no port"));
        assert!(refused(&tenant("\"Bad.Name\"", "")).unwrap().contains("a tenant's name"));
        let ungranted = tenant("t", "grants = { kv = [\"nope\"] }");
        assert!(refused(&ungranted).unwrap().contains("tenants.t.grants.kv[0]"));
    }
}
