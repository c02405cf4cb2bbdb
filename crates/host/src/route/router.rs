//! Matching a request to a route, the way Envoy picks a virtual host and then a route:
//!
//! 1. **Host.** Routes that name a `host` form one table per host
//!    ([`HostPattern`]); the request's host (from the URI authority or the `Host` header,
//!    lower-cased) selects its table: the exact host with its port, then without it (unless
//!    the route's host names one), then the nearest wildcard above it (`*.b.example.com`
//!    before `*.example.com`). A request whose host has no table uses the table of routes
//!    without a `host`. There is no fallback from a host's table to another. A table may be
//!    reserved with no routes ([`Router::with_tables`]): a tenant's hosts are its own whether
//!    or not it has deployed anything, so their requests never reach the default table.
//! 2. **Path.** In that table an exact `path` beats any `prefix`; among prefixes the longest
//!    wins; among equals, the first in the file.
//! 3. **Method.** The first route, in that order, whose methods include the request's wins. If
//!    paths matched but no method did, the answer is 405 with the methods that would have.
//!
//! ```text
//!  host ──▶ table (exact host, else *.parent, else default) ──▶ exact[path] ++ prefixes
//!                                                 (longest first) └─ first whose methods allow ─▶ route
//! ```
//!
//! Hot path: one hash lookup for the host (one per parent domain too, when some route names a
//! wildcard), one for the exact path, then a scan of the prefixes, which are few.

use std::collections::HashMap;

use http::Method;

use super::host_pattern::{HostPattern, parents, strip_port};
use super::path::prefix_matches;
use crate::config::RouteConfig;

/// A route, compiled.
#[derive(Debug, Clone)]
pub struct Route<T> {
    /// Its name in logs.
    pub name: String,
    /// What it leads to.
    pub target: T,
    methods: Vec<Method>,
}

#[derive(Debug, Clone)]
struct Table {
    exact: HashMap<String, Vec<usize>>,
    /// `(prefix, route)`, longest prefix first; stable, so file order breaks ties.
    prefixes: Vec<(String, usize)>,
}

impl Table {
    fn new() -> Self {
        Self { exact: HashMap::new(), prefixes: Vec::new() }
    }

    fn candidates<'a>(&'a self, path: &'a str) -> impl Iterator<Item = usize> + 'a {
        let exact = self.exact.get(path).into_iter().flatten().copied();
        let prefixed = self
            .prefixes
            .iter()
            .filter(move |(prefix, _)| prefix_matches(prefix, path))
            .map(|(_, route)| *route);
        exact.chain(prefixed)
    }
}

/// What the router decided.
#[derive(Debug)]
pub enum Match<'a, T> {
    /// This route serves the request.
    Found(&'a Route<T>),
    /// Routes match the path but not the method; these methods would.
    MethodNotAllowed(Vec<Method>),
    /// No route matches.
    NotFound,
}

/// The compiled route table.
#[derive(Debug, Clone)]
pub struct Router<T> {
    routes: Vec<Route<T>>,
    by_host: HashMap<String, Table>,
    /// Wildcard tables, by the domain their hosts are below.
    below: HashMap<String, Table>,
    default: Table,
}

impl<T> Router<T> {
    /// Compiles routes (already validated, see [`crate::config`]); `target` maps each route (its
    /// name in logs and its configuration) to what it serves.
    pub fn new(configs: &[RouteConfig], mut target: impl FnMut(&str, &RouteConfig) -> T) -> Self {
        let mut router = Self {
            routes: Vec::new(),
            by_host: HashMap::new(),
            below: HashMap::new(),
            default: Table::new(),
        };
        for config in configs {
            let id = router.routes.len();
            // Validation refuses a host that does not parse; such a route is left out.
            let Ok(host) = HostPattern::parse(config.host.as_deref()) else { continue };
            let table = router.table_mut(host);
            match (&config.path, &config.prefix) {
                (Some(path), _) => table.exact.entry(path.clone()).or_default().push(id),
                (None, Some(prefix)) => table.prefixes.push((prefix.clone(), id)),
                // Validation rejects this; a route that matches nothing is simply left out.
                (None, None) => continue,
            }
            let name = config.name.clone().unwrap_or_else(|| format!("routes[{id}]"));
            router.routes.push(Route {
                target: target(&name, config),
                name,
                methods: config
                    .methods
                    .iter()
                    .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
                    .collect(),
            });
        }
        let tables = router.by_host.values_mut().chain(router.below.values_mut());
        for table in tables.chain([&mut router.default]) {
            table.prefixes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        }
        router
    }

    /// With a table for each of `hosts`, empty where no route names it: their requests are
    /// matched there (404 without a route), never in the default table.
    pub fn with_tables<'h>(mut self, hosts: impl IntoIterator<Item = &'h HostPattern>) -> Self {
        for host in hosts {
            self.table_mut(host.clone());
        }
        self
    }

    fn table_mut(&mut self, host: HostPattern) -> &mut Table {
        match host {
            HostPattern::Any => &mut self.default,
            HostPattern::Exact(host) => self.by_host.entry(host).or_insert_with(Table::new),
            HostPattern::Below(domain) => self.below.entry(domain).or_insert_with(Table::new),
        }
    }

    /// Matches a request. `host` is as received (any case, maybe with a port).
    pub fn route(&self, host: &str, path: &str, method: &Method) -> Match<'_, T> {
        let table = self.table(host);
        let mut allowed = Vec::new();
        for index in table.candidates(path) {
            let route = &self.routes[index];
            if route.methods.is_empty() || route.methods.contains(method) {
                return Match::Found(route);
            }
            allowed.extend(route.methods.iter().cloned());
        }
        if allowed.is_empty() {
            Match::NotFound
        } else {
            allowed.dedup();
            Match::MethodNotAllowed(allowed)
        }
    }

    fn table(&self, host: &str) -> &Table {
        if self.by_host.is_empty() && self.below.is_empty() {
            return &self.default;
        }
        // Hosts almost always arrive in lower case: only allocate when one does not.
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            std::borrow::Cow::Owned(host.to_ascii_lowercase())
        } else {
            std::borrow::Cow::Borrowed(host)
        };
        let name = strip_port(&host);
        self.by_host
            .get(host.as_ref())
            .or_else(|| self.by_host.get(name))
            .or_else(|| {
                if self.below.is_empty() {
                    return None;
                }
                parents(name).find_map(|domain| self.below.get(domain))
            })
            .unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn route(
        host: Option<&str>,
        path: Option<&str>,
        prefix: Option<&str>,
        methods: &[&str],
        name: &str,
    ) -> RouteConfig {
        RouteConfig {
            name: Some(name.into()),
            host: host.map(Into::into),
            path: path.map(Into::into),
            prefix: prefix.map(Into::into),
            methods: methods.iter().map(|m| m.to_string()).collect(),
            worker: Some("w".into()),
            upstream: None,
            split: None,
            respond: None,
            identity: None,
            rate_limits: Vec::new(),
        }
    }

    fn router(routes: &[RouteConfig]) -> Router<String> {
        Router::new(routes, |_, r| r.name.clone().unwrap())
    }

    fn found(r: &Router<String>, host: &str, path: &str, method: Method) -> Option<String> {
        match r.route(host, path, &method) {
            Match::Found(route) => Some(route.target.clone()),
            _ => None,
        }
    }

    #[test]
    fn exact_beats_prefix_and_longest_prefix_wins() {
        let r = router(&[
            route(None, None, Some("/"), &[], "root"),
            route(None, None, Some("/api"), &[], "api"),
            route(None, None, Some("/api/v2"), &[], "v2"),
            route(None, Some("/api/v2/health"), None, &[], "health"),
        ]);
        assert_eq!(found(&r, "x", "/api/v2/health", Method::GET).unwrap(), "health");
        assert_eq!(found(&r, "x", "/api/v2/users", Method::GET).unwrap(), "v2");
        assert_eq!(found(&r, "x", "/api/v1", Method::GET).unwrap(), "api");
        assert_eq!(found(&r, "x", "/api", Method::GET).unwrap(), "api");
        assert_eq!(
            found(&r, "x", "/apix", Method::GET).unwrap(),
            "root",
            "prefixes match whole segments"
        );
        assert_eq!(found(&r, "x", "/", Method::GET).unwrap(), "root");
    }

    #[test]
    fn methods_filter_and_405_lists_the_allowed() {
        let r = router(&[
            route(None, Some("/echo"), None, &["POST"], "post"),
            route(None, None, Some("/echo"), &["PUT"], "put"),
        ]);
        assert_eq!(found(&r, "x", "/echo", Method::POST).unwrap(), "post");
        assert_eq!(found(&r, "x", "/echo", Method::PUT).unwrap(), "put");
        match r.route("x", "/echo", &Method::GET) {
            Match::MethodNotAllowed(allowed) => assert_eq!(allowed, [Method::POST, Method::PUT]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(r.route("x", "/nothing", &Method::GET), Match::NotFound));
    }

    #[test]
    fn hosts_select_their_own_table() {
        let r = router(&[
            route(Some("API.example.com"), None, Some("/"), &[], "api-root"),
            route(Some("admin.example.com:8443"), None, Some("/"), &[], "admin-8443"),
            route(None, None, Some("/"), &[], "default"),
        ]);
        assert_eq!(found(&r, "api.example.com", "/x", Method::GET).unwrap(), "api-root");
        assert_eq!(found(&r, "Api.Example.Com:8080", "/x", Method::GET).unwrap(), "api-root");
        assert_eq!(found(&r, "admin.example.com:8443", "/", Method::GET).unwrap(), "admin-8443");
        assert_eq!(found(&r, "admin.example.com", "/", Method::GET).unwrap(), "default");
        assert_eq!(found(&r, "other.example.com", "/", Method::GET).unwrap(), "default");
        assert_eq!(found(&r, "", "/", Method::GET).unwrap(), "default");
    }

    #[test]
    fn a_host_table_does_not_fall_back() {
        let r = router(&[
            route(Some("a.example"), Some("/only"), None, &[], "a"),
            route(None, None, Some("/"), &[], "default"),
        ]);
        assert!(matches!(r.route("a.example", "/other", &Method::GET), Match::NotFound));
    }

    #[test]
    fn ports_are_stripped_carefully() {
        assert_eq!(strip_port("a:80"), "a");
        assert_eq!(strip_port("a"), "a");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
    }

    #[test]
    fn a_wildcard_host_takes_the_names_below_it_the_nearest_first() {
        let r = router(&[
            route(Some("*.example.com"), None, Some("/"), &[], "any-below"),
            route(Some("*.b.example.com"), None, Some("/"), &[], "below-b"),
            route(Some("exact.example.com"), None, Some("/"), &[], "exact"),
            route(None, None, Some("/"), &[], "default"),
        ]);
        assert_eq!(found(&r, "a.example.com", "/", Method::GET).unwrap(), "any-below");
        assert_eq!(found(&r, "x.a.example.com:80", "/", Method::GET).unwrap(), "any-below");
        assert_eq!(found(&r, "x.b.example.com", "/", Method::GET).unwrap(), "below-b");
        assert_eq!(found(&r, "Exact.example.com", "/", Method::GET).unwrap(), "exact");
        assert_eq!(found(&r, "example.com", "/", Method::GET).unwrap(), "default");
        assert_eq!(found(&r, "other.org", "/", Method::GET).unwrap(), "default");
    }

    #[test]
    fn a_reserved_table_keeps_its_hosts_out_of_the_default_table() {
        let reserved = [
            HostPattern::parse(Some("tenant.example")).unwrap(),
            HostPattern::parse(Some("*.tenant.example")).unwrap(),
        ];
        let r = router(&[route(None, None, Some("/"), &[], "default")]).with_tables(&reserved);
        assert!(matches!(r.route("tenant.example", "/", &Method::GET), Match::NotFound));
        assert!(matches!(r.route("a.tenant.example", "/", &Method::GET), Match::NotFound));
        assert_eq!(found(&r, "other.example", "/", Method::GET).unwrap(), "default");
    }

    proptest! {
        /// Among prefix routes, the one chosen is always a longest segment-wise match.
        #[test]
        fn longest_matching_prefix_wins(
            prefixes in proptest::collection::vec("/[ab]{0,3}(/[ab]{1,2}){0,2}", 1..8),
            path in "/[ab]{0,3}(/[ab]{1,2}){0,3}",
        ) {
            let routes: Vec<RouteConfig> = prefixes
                .iter()
                .enumerate()
                .map(|(i, p)| route(None, None, Some(p), &[], &i.to_string()))
                .collect();
            let r = router(&routes);
            let best = prefixes.iter().filter(|p| prefix_matches(p, &path)).map(|p| p.len()).max();
            match (found(&r, "h", &path, Method::GET), best) {
                (Some(i), Some(len)) => {
                    let chosen = &prefixes[i.parse::<usize>().unwrap()];
                    prop_assert!(prefix_matches(chosen, &path));
                    prop_assert_eq!(chosen.len(), len);
                }
                (None, None) => {}
                (got, want) => prop_assert!(false, "got {:?}, longest match {:?}", got, want),
            }
        }
    }
}
