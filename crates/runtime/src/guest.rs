//! What both guest ABIs share (the core module's and the wasi:http component's): the request
//! a guest gets, what it decides, what it cost, and what the store knows of its worker. A
//! leaf of the runtime: each ABI imports it, and neither imports the other.

pub(crate) mod escape;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use edgegate_abi::request::{Headers, RequestParts};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::capability::fetch::Fetcher;
use crate::capability::keys::Keys;
use crate::limits::Limits;
use crate::limits::usage::Progress;

/// A request's id, unique within a gateway process: 16 hex digits in logs and error bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

impl RequestId {
    /// The id's 16 lowercase hex digits, as [`Display`](std::fmt::Display) writes them,
    /// without a formatter.
    pub fn hex(self) -> [u8; 16] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0; 16];
        for (i, digit) in out.iter_mut().enumerate() {
            *digit = DIGITS[(self.0 >> (60 - 4 * i) & 0xf) as usize];
        }
        out
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A request as the runtime hands it to a guest: the head and the complete body.
#[derive(Debug, Clone, Default)]
pub struct GuestRequest {
    /// The method.
    pub method: http::Method,
    /// The URI: its path and query become the guest's target; its authority, if any, the
    /// guest's host.
    pub uri: http::Uri,
    /// The headers.
    pub headers: HeaderMap,
    /// The whole body, already read within the worker's limit.
    pub body: Bytes,
    /// Whether the client connected over TLS.
    pub tls: bool,
}

/// The ABI's view of a [`HeaderMap`].
#[derive(Clone, Copy)]
pub(crate) struct HeaderMapHeaders<'a>(&'a HeaderMap);

impl Headers for HeaderMapHeaders<'_> {
    fn visit<F: FnMut(&[u8], &[u8])>(&self, mut f: F) {
        for (name, value) in self.0 {
            f(name.as_str().as_bytes(), value.as_bytes());
        }
    }
}

impl GuestRequest {
    fn authority(&self) -> &str {
        match self.uri.authority() {
            Some(authority) => authority.as_str(),
            None => {
                self.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("")
            }
        }
    }

    /// The parts the ABI encodes, without the body (held by the host as blob 0).
    pub(crate) fn head(&self) -> RequestParts<'_, HeaderMapHeaders<'_>> {
        RequestParts { body: &[], body_held: true, ..self.parts() }
    }

    /// The parts the ABI encodes.
    pub(crate) fn parts(&self) -> RequestParts<'_, HeaderMapHeaders<'_>> {
        RequestParts {
            method: self.method.as_str(),
            target: self.uri.path_and_query().map_or("/", |pq| pq.as_str()),
            authority: self.authority(),
            headers: HeaderMapHeaders(&self.headers),
            body: &self.body,
            tls: self.tls,
            body_held: false,
        }
    }
}

/// A response body sent as the guest writes it.
pub type StreamedBody =
    http_body_util::combinators::UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What a guest decided, once decoded and checked.
#[derive(Debug)]
pub enum GuestOutcome {
    /// A complete response to send.
    Response(http::Response<Bytes>),
    /// A response whose head is checked and whose body is still being written: a component's
    /// answer past the buffer. The body ends with an error, not cleanly, if the guest fails
    /// before it is whole. Its [`Progress`] tells what the guest used, and why the body was
    /// cut if it was, when the body ends.
    Streamed(http::Response<StreamedBody>, Arc<Progress>),
    /// Proxy the request to an upstream.
    Forward(Forward),
}

/// A decoded forward directive, with the request it is for (handed back from the store, not
/// copied).
#[derive(Debug, Clone)]
pub struct Forward {
    /// The upstream's configured name.
    pub upstream: String,
    /// Header edits to apply to the request before proxying, in order.
    pub edits: Vec<HeaderEdit>,
    /// The request the guest saw, to proxy.
    pub request: GuestRequest,
}

/// One header edit of a [`Forward`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderEdit {
    /// Replace all values.
    Set(HeaderName, HeaderValue),
    /// Add a value.
    Append(HeaderName, HeaderValue),
    /// Remove the header.
    Remove(HeaderName),
}

/// What the store remembers about the worker, shared by all its requests.
#[derive(Debug)]
pub(crate) struct WorkerShared {
    pub(crate) name: String,
    pub(crate) limits: Limits,
    pub(crate) config: BTreeMap<String, String>,
    /// `config`, encoded once for `config_all`.
    pub(crate) config_block: Vec<u8>,
    pub(crate) keys: Option<Keys>,
    /// The policy `jwt_claims` checks tokens against: the `jwt.*` keys of `config`, read once.
    pub(crate) jwt: edgegate_sdk::jwt::Validation,
    /// The KV namespaces the worker is granted.
    pub(crate) kv: Vec<edgegate_kv::Namespace>,
    /// How it makes outbound requests; `None`: it may make none.
    pub(crate) fetcher: Option<Arc<dyn Fetcher>>,
    /// What its image work may use; `None`: it may do none.
    pub(crate) image: Option<Arc<crate::capability::image::ImageShared>>,
    pub(crate) wall_clock: fn() -> std::time::SystemTime,
    /// The epoch ticks a guest must have been seen running at before its CPU budget can stop
    /// it: the budget in ticks, at least 1.
    pub(crate) cpu_ticks: u32,
    /// The epoch tick: how much of a poll is charged by the wall clock before the CPU clock
    /// is read (see [`cpu`]).
    pub(crate) epoch_tick: Duration,
    /// What every request tells the runtime's epoch ticker.
    pub(crate) activity: Arc<crate::engine::Activity>,
}

#[cfg(test)]
mod tests {
    use super::RequestId;

    #[test]
    fn a_request_ids_hex_is_what_display_writes() {
        for id in [0, 1, 0xa, 0x1f2e3d4c5b6a7988, u64::MAX] {
            let id = RequestId(id);
            assert_eq!(std::str::from_utf8(&id.hex()).unwrap(), id.to_string());
        }
    }
}
