//! Workers' outbound requests (`fetch_start`): the allow-list, and the pools they go through.
//!
//! A worker may fetch
//!
//! * `upstream://NAME/path` from an upstream it is granted (`workers.NAME.upstreams`), through
//!   that upstream's pool, with its timeouts;
//! * `http(s)://host[:port]/path` from an origin in its `fetch` list, matched on scheme, host
//!   (case-insensitive) and port (the scheme's default when omitted), through the `[fetch]`
//!   pool.
//!
//! Anything else is refused before a connection is made. Hop-by-hop headers and `Host` are
//! dropped from the guest's request (the pool sets `Host` from the URL); the response body is
//! read whole, at most the worker's `subrequest_body` bytes, and cut off when it stalls for
//! the pool's idle timeout. Nothing is retried.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use edgegate_runtime::{FetchError, FetchFuture, Fetcher};
use http::header;
use http::uri::{PathAndQuery, Scheme};
use http_body_util::{BodyExt, Full};

use crate::client::{self, HttpClient, SendFailure};
use crate::error::error_chain;
use crate::upstream::{Upstream, strip_hop_by_hop};

/// A scheme, host and port a worker may fetch from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    https: bool,
    host: String,
    port: u16,
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
    fn of(uri: &http::Uri) -> Option<Self> {
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

/// The pool fetches to allowed origins go through.
#[derive(Debug, Clone)]
pub(crate) struct FetchPool {
    client: HttpClient,
    first_byte_timeout: Duration,
    idle_timeout: Duration,
}

impl FetchPool {
    pub(crate) fn new(
        section: &crate::config::FetchSection,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Self, client::ClientError> {
        let client = client::build(&client::ClientSettings {
            connect_timeout: section.connect_timeout,
            idle_timeout: section.idle_timeout,
            max_idle: section.max_idle,
            ca_file,
            name: "(fetch)",
        })?;
        Ok(Self {
            client,
            first_byte_timeout: section.first_byte_timeout,
            idle_timeout: section.idle_timeout,
        })
    }

    /// This pool and its timeouts, for a fetch to `name`.
    fn via(&self, name: String) -> Via {
        Via {
            client: self.client.clone(),
            first_byte_timeout: self.first_byte_timeout,
            idle_timeout: self.idle_timeout,
            name,
        }
    }
}

/// One pool and its timeouts, as a fetch uses them.
#[derive(Debug, Clone)]
pub(crate) struct Via {
    pub(crate) client: HttpClient,
    pub(crate) first_byte_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    /// For error messages: the upstream's name or the origin.
    pub(crate) name: String,
}

/// Sends `request` through `via` and reads the whole response, at most `max_body` bytes.
pub(crate) async fn send(
    via: Via,
    mut request: http::Request<Bytes>,
    max_body: u64,
) -> Result<http::Response<Bytes>, FetchError> {
    strip_hop_by_hop(request.headers_mut());
    request.headers_mut().remove(header::HOST);
    request.headers_mut().remove(header::CONTENT_LENGTH);
    let request = request.map(Full::new);
    let name = &via.name;
    let response = match tokio::time::timeout(via.first_byte_timeout, via.client.request(request))
        .await
    {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => {
            let detail = format!("{name}: {}", error_chain(&e));
            return Err(match client::classify(&e) {
                SendFailure::Timeout => FetchError::Timeout(detail),
                SendFailure::Connect | SendFailure::BadResponse => FetchError::Unavailable(detail),
            });
        }
        Err(_) => {
            return Err(FetchError::Timeout(format!(
                "{name}: no response head after {:?}",
                via.first_byte_timeout
            )));
        }
    };
    let (mut parts, mut body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let mut collected = BytesMut::new();
    loop {
        let frame = match tokio::time::timeout(via.idle_timeout, body.frame()).await {
            Err(_) => {
                return Err(FetchError::Timeout(format!(
                    "{name}: the body stalled for {:?}",
                    via.idle_timeout
                )));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(FetchError::Unavailable(format!("{name}: body: {}", error_chain(&e))));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if (collected.len() + data.len()) as u64 > max_body {
                return Err(FetchError::TooLarge(max_body));
            }
            collected.extend_from_slice(&data);
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(http::Response::from_parts(parts, collected.freeze()))
}

/// One worker's fetches: its granted upstreams, its allowed origins and the shared pool.
#[derive(Debug)]
pub(crate) struct WorkerFetcher {
    pub(crate) upstreams: HashMap<String, Arc<Upstream>>,
    pub(crate) origins: Vec<Origin>,
    pub(crate) pool: FetchPool,
}

impl Fetcher for WorkerFetcher {
    fn start(
        &self,
        mut request: http::Request<Bytes>,
        max_body: u64,
    ) -> Result<FetchFuture, FetchError> {
        let uri = request.uri().clone();
        if uri.scheme_str() == Some("upstream") {
            let name = uri.host().unwrap_or("");
            let upstream = self.upstreams.get(name).ok_or_else(|| {
                FetchError::NotAllowed(format!("upstream `{name}` is not granted"))
            })?;
            let path = uri.path_and_query().cloned().unwrap_or(PathAndQuery::from_static("/"));
            *request.uri_mut() = upstream.uri(path)?;
            return Ok(Box::pin(send(upstream.via(), request, max_body)));
        }
        let origin = Origin::of(&uri)
            .ok_or_else(|| FetchError::Invalid(format!("`{uri}`: not http, https or upstream")))?;
        if !self.origins.contains(&origin) {
            let scheme = if origin.https { Scheme::HTTPS } else { Scheme::HTTP };
            return Err(FetchError::NotAllowed(format!(
                "{scheme}://{}:{} is not in the worker's fetch list",
                origin.host, origin.port
            )));
        }
        let via = self.pool.via(format!("{}:{}", origin.host, origin.port));
        Ok(Box::pin(send(via, request, max_body)))
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
