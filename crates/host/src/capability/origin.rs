//! The origins a worker may fetch from (`workers.NAME.fetch`), and the origins an operator
//! grants a tenant's workers (`grants.fetch`): a scheme, a host and a port, where the host
//! may be one name, every name below a domain (`https://*.example.com`) or any name
//! (`https://*`). A leaf module: the configuration checks origins with it, and `fetch` matches
//! requests against them.

/// An origin pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) https: bool,
    pub(crate) host: OriginHost,
    pub(crate) port: u16,
}

/// The host part of an [`Origin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OriginHost {
    /// One host, lower case: a name or an address.
    Exact(String),
    /// Every name below this domain (`*.example.com`), not the domain itself.
    Below(String),
    /// Any host (`*`).
    Any,
}

/// Why a `fetch` entry is not an origin.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OriginError {
    /// Not a URL at all.
    #[error("`{text}` is not a URL")]
    NotUrl {
        text: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    /// A URL, but with a path, userinfo or another scheme.
    #[error(
        "`{0}` must be an origin: http://host[:port] or https://host[:port]; the host may be \
         `*.domain` or `*`"
    )]
    NotOrigin(String),
}

impl Origin {
    /// Parses `http://host[:port]` or `https://…` (a trailing `/` allowed, nothing more);
    /// the host may be `*.domain` or `*`.
    pub(crate) fn parse(text: &str) -> Result<Self, OriginError> {
        // `*` is not a character a URI's host may have: swapped for a label that is, which
        // no real host is.
        const STAR: &str = "edgegate-any-host.invalid";
        let (text_for_uri, wild) = match text.split_once("://") {
            Some((scheme, rest)) if rest.starts_with('*') => {
                (format!("{scheme}://{STAR}{}", &rest[1..]), true)
            }
            _ => (text.to_owned(), false),
        };
        let uri: http::Uri = text_for_uri
            .parse()
            .map_err(|source| OriginError::NotUrl { text: text.into(), source })?;
        let path_ok = uri.path_and_query().is_none_or(|pq| pq.as_str() == "/");
        let mut origin = Self::of(&uri)
            .filter(|o| {
                path_ok && !text.contains('@') && !o.exact_host().is_some_and(|h| h.contains('*'))
            })
            .ok_or_else(|| OriginError::NotOrigin(text.into()))?;
        if wild {
            let OriginHost::Exact(host) = &origin.host else { unreachable!("parsed as one host") };
            origin.host = match host.strip_prefix(STAR) {
                Some("") => OriginHost::Any,
                Some(domain) if domain.starts_with('.') && domain.len() > 1 => {
                    OriginHost::Below(domain[1..].to_owned())
                }
                _ => return Err(OriginError::NotOrigin(text.into())),
            };
        }
        Ok(origin)
    }

    /// The origin of an absolute `http`/`https` URI.
    pub(crate) fn of(uri: &http::Uri) -> Option<Self> {
        let https = match uri.scheme_str()? {
            "http" => false,
            "https" => true,
            _ => return None,
        };
        let authority = uri.authority()?;
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = OriginHost::Exact(authority.host().to_ascii_lowercase());
        Some(Self { https, host, port })
    }

    /// Whether every origin `self` matches is one `outer` matches.
    pub(crate) fn within(&self, outer: &Self) -> bool {
        self.https == outer.https
            && self.port == outer.port
            && match (&self.host, &outer.host) {
                (_, OriginHost::Any) => true,
                (OriginHost::Exact(a), OriginHost::Exact(b)) => a == b,
                (OriginHost::Exact(name), OriginHost::Below(domain)) => below(name, domain),
                (OriginHost::Below(inner), OriginHost::Below(domain)) => {
                    inner == domain || below(inner, domain)
                }
                _ => false,
            }
    }

    /// Whether this pattern names one host, not many.
    pub(crate) fn is_exact(&self) -> bool {
        matches!(self.host, OriginHost::Exact(_))
    }

    /// The one host it names, if it names one.
    pub(crate) fn exact_host(&self) -> Option<&str> {
        match &self.host {
            OriginHost::Exact(host) => Some(host),
            _ => None,
        }
    }
}

/// Whether `name` is below `domain`: `a.example.com` is below `example.com`.
fn below(name: &str, domain: &str) -> bool {
    name.strip_suffix(domain).is_some_and(|head| head.len() > 1 && head.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::{Origin, OriginHost};

    #[test]
    fn origins_are_scheme_host_and_port() {
        let o = |t: &str| Origin::parse(t);
        assert_eq!(o("http://Example.com").unwrap(), o("http://example.com:80/").unwrap());
        assert_ne!(o("https://example.com").unwrap(), o("http://example.com:443").unwrap());
        assert_eq!(o("https://example.com").unwrap().port, 443);
        assert_eq!(o("http://127.0.0.1:9000").unwrap().port, 9000);
        for bad in [
            "example.com",
            "ftp://example.com",
            "http://example.com/path",
            "http://u:p@example.com",
            "http://example.com/?q",
            "https://*x.example.com",
            "https://a.*.example.com",
            "https://*./",
        ] {
            assert!(o(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wildcards_match_the_names_below_or_any_and_nest() {
        let o = |t: &str| Origin::parse(t).unwrap();
        assert_eq!(o("https://*.Example.com").host, OriginHost::Below("example.com".into()));
        assert_eq!(o("https://*").host, OriginHost::Any);
        assert_eq!(o("https://*:8443").port, 8443);
        assert!(o("https://api.example.com").within(&o("https://*.example.com")));
        assert!(o("https://*.a.example.com").within(&o("https://*.example.com")));
        assert!(!o("https://example.com").within(&o("https://*.example.com")));
        assert!(o("https://anything.org").within(&o("https://*")));
        assert!(!o("http://anything.org").within(&o("https://*")), "the scheme");
        assert!(!o("https://a.org:8443").within(&o("https://*")), "the port");
        assert!(!o("https://*").within(&o("https://*.example.com")));
        assert!(o("https://*.example.com").within(&o("https://*.example.com")));
    }
}
