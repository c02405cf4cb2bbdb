//! Building requests natively, to unit test a worker's `handle` function without a gateway.
//!
//! ```
//! use edgegate_sdk::testing::TestRequest;
//! let t = TestRequest::new("POST", "/echo").header("Content-Type", "application/json").body(b"{}");
//! let req = t.request();
//! assert_eq!(req.header("content-type"), Some("application/json"));
//! ```

use crate::Request;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use edgegate_abi::request::{self, RequestParts};

/// An owned request, encoded exactly as the gateway encodes it.
#[derive(Debug, Clone)]
pub struct TestRequest {
    method: String,
    target: String,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
    encoded: Vec<u8>,
}

impl TestRequest {
    /// A request with no headers and no body.
    pub fn new(method: &str, target: &str) -> Self {
        let mut t = Self {
            method: method.into(),
            target: target.into(),
            headers: Vec::new(),
            body: Vec::new(),
            encoded: Vec::new(),
        };
        t.encode();
        t
    }

    /// Adds a header; like the gateway, the name is sent in lower case.
    pub fn header(self, name: &str, value: &str) -> Self {
        self.header_bytes(name, value.as_bytes())
    }

    /// Adds a header with a value that need not be UTF-8.
    pub fn header_bytes(mut self, name: &str, value: &[u8]) -> Self {
        self.headers.push((name.to_ascii_lowercase().into_bytes(), value.to_vec()));
        self.encode();
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: &[u8]) -> Self {
        self.body = body.to_vec();
        self.encode();
        self
    }

    /// The request as a worker sees it.
    pub fn request(&self) -> Request<'_> {
        // `encode` produced a well-formed buffer; failing here is a bug in the ABI crate.
        Request::parse(&self.encoded).expect("TestRequest encodes a valid request")
    }

    fn encode(&mut self) {
        let pairs: Vec<(&[u8], &[u8])> =
            self.headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())).collect();
        let authority = pairs
            .iter()
            .find(|(n, _)| *n == b"host")
            .and_then(|(_, v)| core::str::from_utf8(v).ok())
            .unwrap_or("");
        let parts = RequestParts {
            method: &self.method,
            target: &self.target,
            authority,
            headers: pairs.as_slice(),
            body: &self.body,
            tls: false,
            body_held: false,
        };
        let len = request::encoded_len(&parts).expect("test request fits in 4 GiB");
        let mut encoded = vec![0; len];
        request::encode(&parts, &mut encoded).expect("buffer has the encoded length");
        self.encoded = encoded;
    }
}

#[cfg(test)]
mod tests {
    //! A [`Request`](crate::Request) as the handler sees it, built with [`TestRequest`].

    use super::TestRequest;

    #[test]
    fn views_every_part() {
        let t = TestRequest::new("POST", "/items/7?sort=asc&flag&x=")
            .header("Host", "api.example.com")
            .header("Content-Type", "application/json")
            .header("X-Dup", "one")
            .header("x-dup", "two")
            .body(b"{\"a\":1}");
        let r = t.request();
        assert_eq!(r.method(), "POST");
        assert_eq!(r.path(), "/items/7");
        assert_eq!(r.target(), "/items/7?sort=asc&flag&x=");
        assert_eq!(r.query(), Some("sort=asc&flag&x="));
        assert_eq!(r.query_param("sort"), Some("asc"));
        assert_eq!(r.query_param("flag"), Some(""));
        assert_eq!(r.query_param("x"), Some(""));
        assert_eq!(r.query_param("missing"), None);
        assert_eq!(r.host(), "api.example.com");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("CONTENT-TYPE"), Some("application/json"));
        assert_eq!(r.header("x-dup"), Some("one"), "the first value wins");
        assert_eq!(r.headers().iter().filter(|(n, _)| *n == b"x-dup").count(), 2);
        assert_eq!(r.body(), b"{\"a\":1}");
        assert!(!r.is_tls());
    }

    #[test]
    fn non_utf8_header_is_only_available_as_bytes() {
        let t = TestRequest::new("GET", "/").header_bytes("x-bin", &[0xff, 0x00]);
        let r = t.request();
        assert_eq!(r.header("x-bin"), None);
        assert_eq!(r.header_bytes("X-Bin"), Some(&[0xff, 0x00][..]));
    }

    #[test]
    fn no_query_means_no_params() {
        let t = TestRequest::new("GET", "/plain");
        let r = t.request();
        assert_eq!(r.query(), None);
        assert_eq!(r.query_param("a"), None);
    }
}
