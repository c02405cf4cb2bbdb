//! The host a request names, checked before it is routed (RFC 9112 §3.2, RFC 9113 §8.3.1).
//!
//! | request | rule |
//! |---|---|
//! | HTTP/1.1 without `Host` | 400 |
//! | more than one `Host` | 400 |
//! | a `Host` or authority that is not `host[:port]` (RFC 3986: a name, IPv4 or `[IPv6]`) | 400 |
//! | absolute form (`GET http://a.example/x`) | routed by its authority; `Host` must still be valid, and is replaced by the authority |
//! | HTTP/2 with `:authority` and a `Host` that differs | 400 |
//!
//! Afterwards there is one host for the request: the router, the worker and the upstream's
//! `X-Forwarded-Host` all see the same one.

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Uri, Version};

/// Why a request's host was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// An HTTP/1.1 request without `Host`.
    #[error("an HTTP/1.1 request without Host")]
    Missing,
    /// More than one `Host` header.
    #[error("{0} Host headers")]
    Repeated(usize),
    /// A `Host` value that is not `host[:port]`.
    #[error("invalid Host {0:?}")]
    Invalid(String),
    /// An authority in the request target that is not `host[:port]`.
    #[error("invalid authority {0:?} in the request target")]
    InvalidAuthority(String),
    /// HTTP/2's `:authority` and `Host` name different hosts.
    #[error("Host {host:?} differs from :authority {authority:?}")]
    Mismatch {
        /// The `Host` header.
        host: String,
        /// The `:authority` pseudo-header.
        authority: String,
    },
}

/// Checks the request's host and leaves one: after it, `Host` (when there is one) equals the
/// request target's authority (when there is one).
pub(crate) fn settle(parts: &mut Parts) -> Result<(), HostError> {
    let mut hosts = parts.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    let repeated = hosts.count();
    if repeated > 0 {
        return Err(HostError::Repeated(repeated + 1));
    }
    if let Some(host) = host
        && !valid(host.as_bytes())
    {
        return Err(HostError::Invalid(String::from_utf8_lossy(host.as_bytes()).into_owned()));
    }
    let Some(authority) = parts.uri.authority() else {
        return match (host, parts.version) {
            (None, Version::HTTP_11) => Err(HostError::Missing),
            _ => Ok(()),
        };
    };
    let authority = authority.as_str();
    if !valid(authority.as_bytes()) {
        return Err(HostError::InvalidAuthority(authority.to_owned()));
    }
    match (host, parts.version) {
        (None, Version::HTTP_11) => Err(HostError::Missing),
        (Some(host), Version::HTTP_2)
            if !host.as_bytes().eq_ignore_ascii_case(authority.as_bytes()) =>
        {
            Err(HostError::Mismatch {
                host: String::from_utf8_lossy(host.as_bytes()).into_owned(),
                authority: authority.to_owned(),
            })
        }
        // Absolute form: RFC 9112 §3.2.2 says the target's authority wins over `Host`.
        (Some(host), _) if host.as_bytes() != authority.as_bytes() => {
            let authority = HeaderValue::from_str(authority)
                .map_err(|_| HostError::InvalidAuthority(authority.to_owned()))?;
            parts.headers.insert(header::HOST, authority);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The host a settled request is for: its authority, else its `Host`, else empty.
pub(crate) fn of<'a>(uri: &'a Uri, headers: &'a http::HeaderMap) -> &'a str {
    match uri.authority() {
        Some(authority) => authority.as_str(),
        None => headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or(""),
    }
}

/// Whether `value` is `uri-host [ ":" port ]` (RFC 3986 §3.2.2): a registered name
/// (unreserved characters, escapes and sub-delims; empty is allowed, RFC 9112 §3.2), an IPv4
/// address, which a name's characters cover, or an IPv6 address in brackets; then an optional
/// port of at most five digits.
fn valid(value: &[u8]) -> bool {
    let (host, port) = match value.iter().rposition(|&b| b == b':') {
        Some(colon) if !value[colon..].contains(&b']') => (&value[..colon], &value[colon + 1..]),
        _ => (value, &b""[..]),
    };
    if port.len() > 5 || !port.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if let Some(literal) = host.strip_prefix(b"[") {
        return literal.strip_suffix(b"]").is_some_and(|ip| {
            std::str::from_utf8(ip).is_ok_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
        });
    }
    let mut i = 0;
    while i < host.len() {
        match host[i] {
            b'%' => {
                let hex = host.get(i + 1..i + 3);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                i += 3;
                continue;
            }
            b if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b) => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(version: Version, uri: &str, hosts: &[&str]) -> Parts {
        let mut request = http::Request::builder().version(version).uri(uri);
        for host in hosts {
            request = request.header(header::HOST, *host);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn settled(version: Version, uri: &str, hosts: &[&str]) -> Result<String, HostError> {
        let mut parts = parts(version, uri, hosts);
        settle(&mut parts)?;
        Ok(of(&parts.uri, &parts.headers).to_owned())
    }

    #[test]
    fn http_1_1_needs_exactly_one_valid_host() {
        let v11 = Version::HTTP_11;
        assert_eq!(settled(v11, "/x", &["api.example:8080"]).unwrap(), "api.example:8080");
        assert_eq!(settled(v11, "/x", &[]), Err(HostError::Missing));
        assert_eq!(settled(v11, "/x", &["a", "b"]), Err(HostError::Repeated(2)));
        assert_eq!(settled(v11, "/x", &["a", "a"]), Err(HostError::Repeated(2)));
        for bad in ["a/b@c", "a b", "a@b", "a:b", "a:123456", "[::1", "[zz]:80", "a\"b"] {
            assert!(
                matches!(settled(v11, "/x", &[bad]), Err(HostError::Invalid(_))),
                "{bad:?} must be refused"
            );
        }
        for good in ["", "a", "127.0.0.1:80", "[::1]:8080", "[::1]", "x-y.example.", "a%41", "a:"] {
            assert!(settled(v11, "/x", &[good]).is_ok(), "{good:?} must be accepted");
        }
        assert_eq!(settled(Version::HTTP_10, "/x", &[]).unwrap(), "", "HTTP/1.0 may omit it");
    }

    #[test]
    fn absolute_form_routes_by_its_authority() {
        let mut p = parts(Version::HTTP_11, "http://b.example/x", &["a.example"]);
        settle(&mut p).unwrap();
        assert_eq!(of(&p.uri, &p.headers), "b.example");
        assert_eq!(p.headers[header::HOST], "b.example", "one host from here on");
        assert_eq!(
            settled(Version::HTTP_11, "http://b.example/x", &[]),
            Err(HostError::Missing),
            "HTTP/1.1 needs Host even then"
        );
        assert!(matches!(
            settled(Version::HTTP_11, "http://u@b.example/x", &["b.example"]),
            Err(HostError::InvalidAuthority(_))
        ));
    }

    #[test]
    fn http_2_host_must_agree_with_authority() {
        let v2 = Version::HTTP_2;
        assert_eq!(settled(v2, "http://a.example/x", &[]).unwrap(), "a.example");
        assert_eq!(settled(v2, "http://a.example/x", &["A.example"]).unwrap(), "a.example");
        assert!(matches!(
            settled(v2, "http://a.example/x", &["b.example"]),
            Err(HostError::Mismatch { .. })
        ));
        assert_eq!(settled(v2, "/x", &["b.example"]).unwrap(), "b.example");
        assert_eq!(settled(v2, "/x", &[]).unwrap(), "");
    }
}
