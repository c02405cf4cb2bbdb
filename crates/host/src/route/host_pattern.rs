//! The host a route or a tenant names, which decides the table of routes a request is matched
//! in ([`super::router`]): one host (`api.example.com`, optionally with a port), every name
//! below a domain (`*.example.com`), or none (the table of requests whose host no other table
//! takes). A leaf: the router selects tables by it, and the configuration checks with it that
//! the traffic tenants own does not overlap.
//!
//! ```text
//!   request host ──▶ exact table (with its port, then without) ──▶ *.parent, longest first
//!                                                                  ──▶ the default table
//! ```

/// A route's or a tenant's host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostPattern {
    /// No host: the default table, of requests whose host selects no other.
    Any,
    /// One host, lower case, maybe with a port (`api.example.com:8443`).
    Exact(String),
    /// Every name below this domain (lower case): `*.example.com` is `Below("example.com")`,
    /// which matches `a.example.com` and `a.b.example.com`, not `example.com`.
    Below(String),
}

/// Why a host is not one a route may name.
#[derive(Debug, thiserror::Error)]
pub enum HostPatternError {
    /// Empty, or with characters no host has.
    #[error("`{0}` is not a host name (optionally with a port), or `*.` and a domain")]
    Invalid(String),
    /// `*` somewhere other than a whole first label, or with a port.
    #[error("`{0}`: a wildcard is `*.` and a domain (`*.example.com`), with no port")]
    Wildcard(String),
}

impl HostPattern {
    /// Parses a route's or a tenant's `host`; `None` is [`HostPattern::Any`].
    pub fn parse(text: Option<&str>) -> Result<Self, HostPatternError> {
        let Some(text) = text else { return Ok(Self::Any) };
        let lower = text.to_ascii_lowercase();
        let valid = |s: &str| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
                && !s.starts_with('.')
        };
        match lower.strip_prefix("*.") {
            Some(domain) if valid(domain) && !domain.contains(['*', ':', '[']) => {
                Ok(Self::Below(domain.to_owned()))
            }
            Some(_) => Err(HostPatternError::Wildcard(text.to_owned())),
            None if lower.contains('*') => Err(HostPatternError::Wildcard(text.to_owned())),
            None if valid(&lower) => Ok(Self::Exact(lower)),
            None => Err(HostPatternError::Invalid(text.to_owned())),
        }
    }

    /// The name an exact host has without its port.
    fn name(&self) -> Option<&str> {
        match self {
            Self::Exact(host) => Some(strip_port(host)),
            _ => None,
        }
    }

    /// Whether one request could be matched by a table of each: the two own some traffic
    /// together. Ports aside, as the router strips them.
    pub fn overlaps(&self, other: &Self) -> bool {
        // Domains nest or are apart, so two patterns share a host only if one holds the other.
        self.within(other) || other.within(self)
    }

    /// Whether every request `self` matches is one `outer` matches. Ports aside.
    pub fn within(&self, outer: &Self) -> bool {
        match (self, outer) {
            (Self::Any, Self::Any) => true,
            (Self::Exact(_), Self::Exact(_)) => self.name() == outer.name(),
            (Self::Exact(_), Self::Below(domain)) => below(self.name().unwrap_or(""), domain),
            (Self::Below(inner), Self::Below(domain)) => inner == domain || below(inner, domain),
            _ => false,
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Any => f.write_str("any host"),
            Self::Exact(host) => f.write_str(host),
            Self::Below(domain) => write!(f, "*.{domain}"),
        }
    }
}

/// Whether `name` is a name below `domain`: `a.example.com` is below `example.com`.
fn below(name: &str, domain: &str) -> bool {
    name.strip_suffix(domain).is_some_and(|head| head.len() > 1 && head.ends_with('.'))
}

/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`; `[::1]` stays.
pub(crate) fn strip_port(host: &str) -> &str {
    match host.rfind(':') {
        Some(colon) if !host[colon..].contains(']') => &host[..colon],
        _ => host,
    }
}

/// The domains a host is below, nearest first: `a.b.example.com` → `b.example.com`,
/// `example.com`, `com`.
pub(crate) fn parents(host: &str) -> impl Iterator<Item = &str> {
    let mut rest = host;
    std::iter::from_fn(move || {
        let dot = rest.find('.')?;
        rest = &rest[dot + 1..];
        (!rest.is_empty()).then_some(rest)
    })
}

#[cfg(test)]
mod tests {
    use super::HostPattern::{self, *};

    fn p(text: &str) -> HostPattern {
        HostPattern::parse(Some(text)).unwrap()
    }

    #[test]
    fn hosts_parse_as_one_name_or_everything_below_a_domain() {
        assert_eq!(p("API.example.com"), Exact("api.example.com".into()));
        assert_eq!(p("api.example.com:8443"), Exact("api.example.com:8443".into()));
        assert_eq!(p("*.Example.com"), Below("example.com".into()));
        assert_eq!(HostPattern::parse(None).unwrap(), Any);
        for bad in ["", "*", "a.*.com", "*.example.com:80", "a b", "x/y", "*.", ".a"] {
            assert!(HostPattern::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn within_and_overlap_follow_what_the_router_matches() {
        assert!(p("a.example.com").within(&p("*.example.com")));
        assert!(p("a.b.example.com").within(&p("*.example.com")));
        assert!(!p("example.com").within(&p("*.example.com")));
        assert!(!p("aexample.com").within(&p("*.example.com")));
        assert!(p("*.b.example.com").within(&p("*.example.com")));
        assert!(p("a.example.com:8443").within(&p("a.example.com")));
        assert!(!p("a.example.com").within(&Any) && !Any.within(&p("a.example.com")));
        assert!(Any.overlaps(&Any));
        assert!(p("*.example.com").overlaps(&p("a.example.com")));
        assert!(p("*.b.example.com").overlaps(&p("*.example.com")));
        assert!(p("a.example.com:1").overlaps(&p("a.example.com:2")));
        assert!(!p("a.example.com").overlaps(&p("b.example.com")));
        assert!(!p("*.a.example").overlaps(&p("*.b.example")));
        // A host's table always exists beside the default one: they never share a request.
        assert!(!Any.overlaps(&p("*.example.com")));
    }

    #[test]
    fn parents_walk_up_label_by_label() {
        let all: Vec<&str> = super::parents("a.b.example.com").collect();
        assert_eq!(all, ["b.example.com", "example.com", "com"]);
        assert_eq!(super::parents("localhost").count(), 0);
    }
}
