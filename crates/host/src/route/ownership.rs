//! Who owns which traffic, judged by the router's own precedence (`super::router`): the
//! configuration file's routes, each tenant's hosts and prefixes, and what the admin API
//! deploys must not share a request, or one could take the other's (and skip its `identity`
//! and `rate_limits` on the way).
//!
//! Two claims share a request when their hosts select a common table and their paths match a
//! common path there:
//!
//! ```text
//!  hosts   a.example ~ a.example:8443     a.example ~ *.example      *.a.example ~ *.example
//!          (no host) ~ (no host)          (no host) ≁ a.example: a tenant's hosts have a
//!                                         table of their own, reserved even when empty
//!  paths   /api/ ~ /api/login (the longer prefix wins there)   /api ≁ /apix   /x ~ /x
//! ```
//!
//! A route the admin API deploys can also take traffic without sharing a path: a route that
//! names a host with no table yet makes one, and that host's requests stop reaching the
//! table they fell to before ([`Claims::table_taken`]).

use std::collections::HashMap;

use super::host_pattern::{HostPattern, parents, strip_port};
use super::path::prefix_matches;

/// The paths a route or a tenant claims in its table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathClaim {
    /// Exactly this path.
    Exact(String),
    /// This path and everything below it, segment-wise.
    Prefix(String),
}

impl PathClaim {
    /// A route's `path` or `prefix`.
    pub(crate) fn of(path: Option<&str>, prefix: Option<&str>) -> Option<Self> {
        match (path, prefix) {
            (Some(path), _) => Some(Self::Exact(path.to_owned())),
            (None, Some(prefix)) => Some(Self::Prefix(prefix.to_owned())),
            (None, None) => None,
        }
    }

    /// Whether one path matches both.
    pub(crate) fn overlaps(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Exact(a), Self::Exact(b)) => a == b,
            (Self::Exact(path), Self::Prefix(prefix))
            | (Self::Prefix(prefix), Self::Exact(path)) => prefix_matches(prefix, path),
            (Self::Prefix(a), Self::Prefix(b)) => prefix_matches(a, b) || prefix_matches(b, a),
        }
    }

    /// Whether every path `self` matches is one `prefix` matches.
    pub(crate) fn within(&self, prefix: &str) -> bool {
        match self {
            Self::Exact(path) | Self::Prefix(path) => prefix_matches(prefix, path),
        }
    }
}

impl std::fmt::Display for PathClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exact(path) => write!(f, "path {path}"),
            Self::Prefix(prefix) => write!(f, "prefix {prefix}"),
        }
    }
}

/// One claim: a host, a path, and who holds it.
#[derive(Debug, Clone)]
pub(crate) struct Claim<O> {
    pub(crate) host: HostPattern,
    pub(crate) path: PathClaim,
    pub(crate) owner: O,
}

/// Claims indexed by host, so that one is checked against those whose hosts could overlap
/// it, not against all (a node may hold thousands of tenants).
#[derive(Debug)]
pub(crate) struct Claims<O> {
    /// Claims with no host.
    any: Vec<Claim<O>>,
    /// Claims of one host, by its name without the port.
    exact: HashMap<String, Vec<Claim<O>>>,
    /// Wildcard claims, by the domain.
    below: HashMap<String, Vec<Claim<O>>>,
}

impl<O> Default for Claims<O> {
    fn default() -> Self {
        Self { any: Vec::new(), exact: HashMap::new(), below: HashMap::new() }
    }
}

impl<O: PartialEq> Claims<O> {
    /// Adds a claim.
    pub(crate) fn add(&mut self, claim: Claim<O>) {
        match &claim.host {
            HostPattern::Any => self.any.push(claim),
            HostPattern::Exact(host) => {
                self.exact.entry(strip_port(host).to_owned()).or_default().push(claim)
            }
            HostPattern::Below(domain) => self.below.entry(domain.clone()).or_default().push(claim),
        }
    }

    /// The claims whose hosts could share a request with `host`.
    fn near<'s: 'h, 'h>(
        &'s self,
        host: &'h HostPattern,
    ) -> Box<dyn Iterator<Item = &'s Claim<O>> + 'h> {
        match host {
            HostPattern::Any => Box::new(self.any.iter()),
            HostPattern::Exact(host) => {
                let name = strip_port(host);
                let same = self.exact.get(name).into_iter().flatten();
                let above = parents(name).filter_map(|d| self.below.get(d)).flatten();
                Box::new(same.chain(above))
            }
            HostPattern::Below(domain) => {
                let above = std::iter::once(domain.as_str())
                    .chain(parents(domain))
                    .filter_map(|d| self.below.get(d))
                    .flatten();
                // Hosts and wildcards below this domain: a scan, as a wildcard claim is rare.
                let inside = self
                    .exact
                    .values()
                    .chain(self.below.iter().filter(move |(d, _)| *d != domain).map(|(_, c)| c))
                    .flatten()
                    .filter(move |c| c.host.within(host));
                Box::new(above.chain(inside))
            }
        }
    }

    /// The first claim of an owner other than `owner` that shares a request with `host` and
    /// `path`.
    pub(crate) fn clash(
        &self,
        host: &HostPattern,
        path: &PathClaim,
        owner: &O,
    ) -> Option<&Claim<O>> {
        self.near(host)
            .find(|c| c.owner != *owner && c.host.overlaps(host) && c.path.overlaps(path))
    }

    /// Whether a claim names exactly this table (the same host, port and all).
    fn has_table(&self, host: &HostPattern) -> bool {
        let same = |claims: Option<&Vec<Claim<O>>>| {
            claims.is_some_and(|claims| claims.iter().any(|c| c.host == *host))
        };
        match host {
            HostPattern::Any => !self.any.is_empty(),
            HostPattern::Exact(name) => same(self.exact.get(strip_port(name))),
            HostPattern::Below(domain) => same(self.below.get(domain)),
        }
    }

    /// For a route of `owner` that names `host`: if no claim has that table yet, the route
    /// makes it, and the requests for `host` stop reaching the table they fall to now. The
    /// first claim of another owner in that table, if any.
    pub(crate) fn table_taken(&self, host: &HostPattern, owner: &O) -> Option<&Claim<O>> {
        if matches!(host, HostPattern::Any) || self.has_table(host) {
            return None;
        }
        self.fallback(host).into_iter().find(|c| c.owner != *owner)
    }

    /// The claims of the table the router picks for `host`'s requests while `host` has no
    /// table of its own: the host without its port, then the nearest wildcard above, then
    /// the default table.
    fn fallback(&self, host: &HostPattern) -> Vec<&Claim<O>> {
        let name = match host {
            HostPattern::Exact(full) => strip_port(full),
            HostPattern::Below(domain) => domain.as_str(),
            HostPattern::Any => return self.any.iter().collect(),
        };
        if matches!(host, HostPattern::Exact(full) if full != name) {
            let claims = in_table(self.exact.get(name), &HostPattern::Exact(name.to_owned()));
            if !claims.is_empty() {
                return claims;
            }
        }
        for domain in parents(name) {
            let claims = in_table(self.below.get(domain), &HostPattern::Below(domain.to_owned()));
            if !claims.is_empty() {
                return claims;
            }
        }
        self.any.iter().collect()
    }
}

/// The claims among `claims` that name exactly the table `table`.
fn in_table<'c, O>(claims: Option<&'c Vec<Claim<O>>>, table: &HostPattern) -> Vec<&'c Claim<O>> {
    claims.into_iter().flatten().filter(|c| c.host == *table).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(host: Option<&str>, path: PathClaim, owner: &'static str) -> Claim<&'static str> {
        Claim { host: HostPattern::parse(host).unwrap(), path, owner }
    }

    fn prefix(p: &str) -> PathClaim {
        PathClaim::Prefix(p.into())
    }

    fn exact(p: &str) -> PathClaim {
        PathClaim::Exact(p.into())
    }

    #[test]
    fn paths_overlap_as_the_router_matches_them() {
        assert!(prefix("/api/").overlaps(&exact("/api/login")));
        assert!(prefix("/api/").overlaps(&prefix("/api/login")));
        assert!(prefix("/api").overlaps(&prefix("/api/")));
        assert!(!prefix("/api").overlaps(&prefix("/apix")));
        assert!(!exact("/a").overlaps(&exact("/b")));
        assert!(prefix("/").overlaps(&exact("/anything")));
        assert!(exact("/api/login").within("/api/") && !prefix("/api").within("/api/"));
    }

    #[test]
    fn a_clash_is_another_owner_s_claim_on_a_shared_request() {
        let mut claims = Claims::default();
        claims.add(claim(None, prefix("/api/"), "file"));
        claims.add(claim(Some("*.acme.example"), prefix("/"), "acme"));
        claims.add(claim(Some("shop.example"), prefix("/cart/"), "shop"));
        let clash = |host, path, owner| {
            let host = HostPattern::parse(host).unwrap();
            claims.clash(&host, &path, &owner).map(|c| c.owner)
        };
        assert_eq!(clash(None, exact("/api/login"), "admin"), Some("file"), "a longer path");
        assert_eq!(clash(None, exact("/api/login"), "file"), None, "its own");
        assert_eq!(clash(None, prefix("/other/"), "admin"), None);
        assert_eq!(clash(Some("a.acme.example"), exact("/x"), "admin"), Some("acme"));
        assert_eq!(clash(Some("*.x.acme.example"), exact("/x"), "b"), Some("acme"));
        assert_eq!(clash(Some("*.example"), exact("/cart/1"), "b"), Some("shop"), "inside");
        assert_eq!(clash(Some("*.example"), exact("/x"), "b"), Some("acme"));
        assert_eq!(clash(Some("shop.example:8443"), prefix("/"), "b"), Some("shop"));
        assert_eq!(clash(Some("shop.example"), prefix("/other/"), "b"), None);
        assert_eq!(clash(Some("other.example"), prefix("/api/"), "b"), None, "another table");
    }

    #[test]
    fn a_new_table_takes_its_host_from_the_table_it_fell_to() {
        let mut claims = Claims::default();
        claims.add(claim(None, prefix("/"), "file"));
        claims.add(claim(Some("*.acme.example"), prefix("/"), "acme"));
        claims.add(claim(Some("known.example"), exact("/x"), "file"));
        let taken = |host, owner| {
            claims.table_taken(&HostPattern::parse(Some(host)).unwrap(), &owner).map(|c| c.owner)
        };
        assert_eq!(taken("victim.example", "admin"), Some("file"), "beside a catch-all");
        assert_eq!(taken("api.acme.example", "admin"), Some("acme"), "under a tenant's wildcard");
        assert_eq!(taken("api.acme.example", "acme"), None, "its own wildcard");
        assert_eq!(taken("known.example", "admin"), None, "the table is there: paths decide");
        assert_eq!(taken("known.example:8443", "admin"), Some("file"), "falls to its port-less");
        let mut empty = Claims::<&str>::default();
        empty.add(claim(Some("a.example"), prefix("/"), "file"));
        let host = HostPattern::parse(Some("b.example")).unwrap();
        assert_eq!(empty.table_taken(&host, &"admin").map(|c| c.owner), None, "nothing to take");
    }
}
