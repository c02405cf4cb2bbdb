//! The admin API's workers merged into the file's configuration, each held to its deployer's
//! grants and caps ([`super::grants`]) and to the traffic its deployer may take:
//!
//! * a tenant's routes lie inside its hosts and prefixes, which the file's routes and other
//!   tenants do not share ([`super::tenant::claims`]);
//! * the admin token's routes take no request from the file's routes or a tenant's traffic, by
//!   the router's precedence: a path under another's prefix is refused, and so is a host
//!   with no table yet whose requests some other owner's routes serve now
//!   (crate::route::ownership);
//! * no two routes match the same host, path and methods.
//!
//! A tenant's worker `api` is served as `acme/api`, its routes named `acme/…`, so two tenants
//! may both deploy `api`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::deploy::Stored;
use super::grants::Admission;
use super::owner::Owner;
use super::{Config, ConfigError, RouteConfig};
use crate::route::host_pattern::HostPattern;
use crate::route::ownership::{Claims, PathClaim};

/// Adds the deployed workers to `config`: each under the name it is served by, its uploaded
/// module resolved against its folder, and its routes (serving it) after the file's own.
/// `last` goes last, so that a clash is reported against it.
pub(super) fn merge(
    config: &mut Config,
    dir: &Path,
    claims: &Claims<Owner>,
    deployed: &BTreeMap<String, Stored>,
    last: Option<&str>,
) -> Result<(), ConfigError> {
    let mut matches: HashMap<Match, Vec<(String, Vec<String>)>> = HashMap::new();
    for (i, route) in config.routes.iter().enumerate() {
        let name = route.name.clone().unwrap_or_else(|| format!("routes[{i}]"));
        matches.entry(Match::of(route)).or_default().push((name, route.methods.clone()));
    }
    let mut counts: HashMap<&Owner, usize> = HashMap::new();
    let others = deployed.iter().filter(|(name, _)| Some(name.as_str()) != last);
    for (qualified, stored) in others.chain(last.and_then(|name| deployed.get_key_value(name))) {
        let Stored { owner, name, deployed, .. } = stored;
        let folder = owner.folder(dir);
        let file = folder.join(format!("{name}.toml")).display().to_string();
        let at = |key: &str, message: String| Err(ConfigError::at(&file, key, message));
        let (grants, caps, by) = match owner {
            Owner::Tenant(tenant) => match config.tenants.get(tenant) {
                Some(t) => (&t.grants, &t.caps, format!("tenants.{tenant}")),
                None => return at("", format!("tenant `{tenant}` is not in [tenants]")),
            },
            Owner::Admin | Owner::File => {
                (&config.deploy.grants, &config.deploy.caps, "deploy".into())
            }
        };
        if config.workers.contains_key(qualified) {
            return at(
                "worker",
                format!("a worker named `{qualified}` is in the configuration file"),
            );
        }
        let count = counts.entry(owner).or_default();
        *count += 1;
        if *count > caps.workers {
            return at("worker", format!("more than {by}.caps.workers ({}) workers", caps.workers));
        }
        let admission = Admission { grants, caps, by: &by, file: &file };
        admission.admit(&deployed.worker, &deployed.routes)?;
        let mut table = deployed.worker.clone();
        if super::names_a_file(&table.module) {
            table.module = folder.join(&table.module).display().to_string();
        }
        table.config.extend(grants.config.clone());
        let tenant = owner.tenant().and_then(|t| config.tenants.get(t));
        for (i, route) in deployed.routes.iter().enumerate() {
            let key = format!("routes[{i}]");
            let route = own_route(route, owner, name, qualified, i)
                .map_err(|m| ConfigError::at(&file, &key, m))?;
            let (host, path) = match (
                HostPattern::parse(route.host.as_deref()),
                PathClaim::of(route.path.as_deref(), route.prefix.as_deref()),
            ) {
                (Ok(host), Some(path)) => (host, path),
                (Err(e), _) => return Err(ConfigError::caused(&file, format!("{key}.host"), e)),
                (_, None) => return at(&key, "needs exactly one of `path` and `prefix`".into()),
            };
            match tenant {
                Some(tenant) if !tenant.owns(&host, &path) => {
                    let hosts = if tenant.hosts.is_empty() {
                        "no host".to_owned()
                    } else {
                        tenant.hosts.join(", ")
                    };
                    return at(
                        &key,
                        format!(
                            "{host}, {path} lies outside what {owner} owns (hosts: {hosts}; prefixes: {})",
                            tenant.prefixes.join(", ")
                        ),
                    );
                }
                Some(_) => {}
                None => {
                    if let Some(clash) = claims.clash(&host, &path, owner) {
                        return at(
                            &key,
                            format!(
                                "{host}, {path} would take requests that {} serves ({}, {})",
                                clash.owner, clash.host, clash.path
                            ),
                        );
                    }
                    if let Some(taken) = claims.table_taken(&host, owner) {
                        return at(
                            &key,
                            format!(
                                "a table for {host} would take that host's requests from {} ({}, {})",
                                taken.owner, taken.host, taken.path
                            ),
                        );
                    }
                }
            }
            let route_name = route.name.clone().unwrap_or_default();
            let same = matches.entry(Match::of(&route)).or_default();
            if let Some((clash, _)) =
                same.iter().find(|(_, methods)| overlap(methods, &route.methods))
            {
                return at(&key, format!("matches the same requests as route `{clash}`"));
            }
            same.push((route_name, route.methods.clone()));
            config.routes.push(route);
        }
        config.workers.insert(qualified.clone(), table);
    }
    Ok(())
}

/// A deployed worker's route as served: it serves that worker (named as served), its name and
/// its identity's worker qualified the same way. `Err`: a route that targets something else.
fn own_route(
    route: &RouteConfig,
    owner: &Owner,
    name: &str,
    qualified: &str,
    i: usize,
) -> Result<RouteConfig, String> {
    let other = route.upstream.is_some() || route.split.is_some() || route.respond.is_some();
    if other || route.worker.as_ref().is_some_and(|w| w != name) {
        return Err(format!("a deployed worker's route serves it, `{name}`, only"));
    }
    let mut route = route.clone();
    route.worker = Some(qualified.to_owned());
    route.name = Some(match &route.name {
        Some(given) => owner.qualified(given),
        None => format!("{qualified}[{i}]"),
    });
    if let Some(identity) = &mut route.identity
        && let Some(worker) = &identity.worker
    {
        if worker != name {
            return Err(format!(
                "identity.worker: a deployed route verifies with its own worker's keys, `{name}`, only"
            ));
        }
        identity.worker = Some(qualified.to_owned());
    }
    Ok(route)
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

#[cfg(test)]
mod tests {
    use crate::config::Loaded;

    /// A site: `main` as its file (with `[deploy] dir = "d"` and a tenant `acme` owning
    /// `acme.example`), and `worker` as the deployed file at `d/FOLDER/api.toml`.
    fn load(main: &str, folder: &str, worker: &str) -> Result<Loaded, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("edgegate.toml");
        let hash = "00".repeat(32);
        let text = format!(
            "[deploy]\ndir = \"d\"\n[tenants.acme]\ntoken_sha256 = \"{hash}\"\nhosts = [\"acme.example\"]\n\
             grants = {{ kv = [\"acme\"] }}\ncaps = {{ cpu = \"5ms\" }}\n[kv.acme]\n[kv.other]\n{main}\n"
        );
        std::fs::write(&path, text).unwrap();
        let folder = dir.path().join("d").join(folder);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("api.toml"), worker).unwrap();
        Loaded::from_file(&path).map_err(|e| e.to_string())
    }

    const ECHO: &str = "[worker]\nmodule = \"builtin:echo-json\"\n";

    #[test]
    fn a_tenant_s_worker_is_served_under_its_name_inside_its_hosts() {
        let worker =
            format!("{ECHO}kv = [\"acme\"]\n[[routes]]\nhost = \"acme.example\"\npath = \"/x\"\n");
        let loaded = load("", "acme", &worker).unwrap();
        assert!(loaded.config.workers.contains_key("acme/api"));
        let route = loaded.config.routes.last().unwrap();
        assert_eq!(
            (route.worker.as_deref(), route.name.as_deref()),
            (Some("acme/api"), Some("acme/api[0]"))
        );
        assert_eq!(loaded.owner("acme/api"), crate::config::Owner::Tenant("acme".into()));
        // Outside its hosts, or with no host at all: refused, naming the file and the key.
        let elsewhere = format!("{ECHO}[[routes]]\nhost = \"victim.example\"\npath = \"/x\"\n");
        let e = load("", "acme", &elsewhere).unwrap_err();
        assert!(
            e.contains("acme/api.toml: routes[0]") && e.contains("outside what tenant `acme` owns"),
            "{e}"
        );
        assert!(load("", "acme", &format!("{ECHO}[[routes]]\npath = \"/x\"\n")).is_err());
    }

    #[test]
    fn what_was_not_granted_or_is_over_a_cap_is_refused_naming_the_key() {
        for (lines, key) in [
            ("kv = [\"other\"]", "worker.kv[0]"),
            ("fetch = [\"http://127.0.0.1:9090\"]", "worker.fetch[0]"),
            ("limits = { cpu = \"10s\" }", "worker.limits.cpu"),
            ("image = true", "worker.image"),
            (
                "jwt = { keys = [{ alg = \"HS256\", secret_env = \"EDGEGATE_ADMIN_TOKEN\" }] }",
                "worker.jwt.keys[0].secret_env",
            ),
            (
                "jwt = { keys = [{ alg = \"RS256\", pem_file = \"/etc/shadow\" }] }",
                "worker.jwt.keys[0].pem_file",
            ),
        ] {
            let e = load("", "acme", &format!("{ECHO}{lines}\n")).unwrap_err();
            assert!(
                e.contains(&format!("api.toml: {key}")) && e.contains("tenants.acme"),
                "{lines}: {e}"
            );
        }
        let oci = "[worker]\nmodule = \"oci://registry.example/x:1\"\n";
        assert!(load("", "acme", oci).unwrap_err().contains("grants.registries"));
    }

    #[test]
    fn the_admin_token_s_routes_take_nothing_the_file_or_a_tenant_serves() {
        let file = "[workers.w]\nmodule = \"builtin:echo-json\"\n[[routes]]\nprefix = \"/api/\"\nworker = \"w\"\n";
        let under = format!("{ECHO}[[routes]]\npath = \"/api/login\"\n");
        let e = load(file, "", &under).unwrap_err();
        assert!(e.contains("would take requests that the configuration file serves"), "{e}");
        // A host with no table, beside the file's host-less routes, would take all its
        // requests from them.
        let host = format!("{ECHO}[[routes]]\nhost = \"victim.example\"\npath = \"/x\"\n");
        let e = load(file, "", &host).unwrap_err();
        assert!(e.contains("a table for victim.example"), "{e}");
        let tenants = format!("{ECHO}[[routes]]\nhost = \"acme.example\"\npath = \"/x\"\n");
        assert!(load("", "", &tenants).unwrap_err().contains("tenant `acme`"));
        let apart = format!("{ECHO}[[routes]]\npath = \"/other\"\n");
        assert!(load(file, "", &apart).is_ok());
    }
}
