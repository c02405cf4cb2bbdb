//! An origin a worker may fetch from (`workers.NAME.fetch`): a scheme, host and port. A leaf
//! module: the configuration checks origins with it, and `fetch` matches requests against them.

/// A scheme, host and port a worker may fetch from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) https: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
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
    #[error("`{0}` must be an origin: http://host[:port] or https://host[:port]")]
    NotOrigin(String),
}

impl Origin {
    /// Parses `http://host[:port]` or `https://…` (a trailing `/` allowed, nothing more).
    pub(crate) fn parse(text: &str) -> Result<Self, OriginError> {
        let uri: http::Uri =
            text.parse().map_err(|source| OriginError::NotUrl { text: text.into(), source })?;
        let path_ok = uri.path_and_query().is_none_or(|pq| pq.as_str() == "/");
        let origin = Self::of(&uri).filter(|_| path_ok && !text.contains('@'));
        origin.ok_or_else(|| OriginError::NotOrigin(text.into()))
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
        Some(Self { https, host: authority.host().to_ascii_lowercase(), port })
    }
}

#[cfg(test)]
mod tests {
    use super::Origin;

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
        ] {
            assert!(o(bad).is_err(), "{bad}");
        }
    }
}
