//! The request buffer: what the host writes into guest memory for one request.
//!
//! ```text
//! offset  size  field
//! 0       4     layout version (= ABI_VERSION)
//! 4       4     method_len
//! 8       4     target_len      path and query as received, e.g. "/echo?x=1"
//! 12      4     authority_len   host[:port] from the URI or the Host header
//! 16      4     header_count
//! 20      4     headers_len     bytes of the header block
//! 24      4     body_len
//! 28      4     flags           bit 0: the client connected over TLS
//!                               bit 1: the body is held by the host (blob 0), not here
//! 32      …     method | target | authority | header block | body
//! ```
//!
//! Method, target and authority are UTF-8 (the host only sends ASCII). Header names are lower
//! case; values are bytes. The body is complete: the host has read it, within the worker's
//! request body limit, before the guest runs.

use crate::codec::{self, HeaderBlock, LengthMismatch, Reader, Writer};
use crate::{ABI_VERSION, DecodeError};

/// The size of the fixed header that starts every request buffer.
pub const FIXED_LEN: usize = 32;

/// Set in the flags field when the client connected over TLS.
pub const FLAG_TLS: u32 = 1;

/// Set in the flags field when the buffer leaves the body out (`body_len` is 0): the host
/// holds it as blob 0, which the guest reads or hands to an image transform by handle
/// (see [`crate::imports::REQUEST_HEAD`]).
pub const FLAG_BODY_HELD: u32 = 2;

/// A source of request headers for [`encode`]: visited once to size, once to write.
pub trait Headers {
    /// Calls `f` with every `(name, value)` pair, in order.
    fn visit<F: FnMut(&[u8], &[u8])>(&self, f: F);
}

impl Headers for [(&[u8], &[u8])] {
    fn visit<F: FnMut(&[u8], &[u8])>(&self, mut f: F) {
        for (name, value) in self {
            f(name, value);
        }
    }
}

impl<T: Headers + ?Sized> Headers for &T {
    fn visit<F: FnMut(&[u8], &[u8])>(&self, f: F) {
        (**self).visit(f);
    }
}

/// The parts of a request, as the host has them, before encoding.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a, H> {
    /// The method, e.g. `GET`.
    pub method: &'a str,
    /// The request target in origin form: path and optional query.
    pub target: &'a str,
    /// `host[:port]`, empty if the client sent none.
    pub authority: &'a str,
    /// The header `(name, value)` pairs.
    pub headers: H,
    /// The whole body.
    pub body: &'a [u8],
    /// Whether the client connected over TLS.
    pub tls: bool,
    /// Whether the body was left out of the buffer, held by the host as blob 0 (then `body`
    /// is empty).
    pub body_held: bool,
}

/// The header count and the header block's length, or `None` if they overflow a `u32`.
fn header_block_len<H: Headers>(headers: &H) -> Option<(u32, u32)> {
    let mut count = 0u32;
    let mut len = Some(0u32);
    headers.visit(|name, value| {
        count = count.wrapping_add(1);
        len = len.and_then(|len| len.checked_add(codec::header_entry_len(name, value)?));
    });
    Some((count, len?))
}

/// The encoded length of `parts`, or `None` if it does not fit in a `u32` (the guest's address
/// space).
pub fn encoded_len<H: Headers>(parts: &RequestParts<'_, H>) -> Option<usize> {
    let mut total = FIXED_LEN as u32;
    for len in [parts.method.len(), parts.target.len(), parts.authority.len(), parts.body.len()] {
        total = total.checked_add(u32::try_from(len).ok()?)?;
    }
    let (_, headers_len) = header_block_len(&parts.headers)?;
    Some(total.checked_add(headers_len)? as usize)
}

/// Encodes `parts` into `out`, which must be exactly [`encoded_len`] bytes long.
pub fn encode<H: Headers>(
    parts: &RequestParts<'_, H>,
    out: &mut [u8],
) -> Result<(), LengthMismatch> {
    let (count, headers_len) = header_block_len(&parts.headers).ok_or(LengthMismatch)?;
    let mut w = Writer::new(out);
    w.u32(ABI_VERSION)?;
    w.u32(parts.method.len() as u32)?;
    w.u32(parts.target.len() as u32)?;
    w.u32(parts.authority.len() as u32)?;
    w.u32(count)?;
    w.u32(headers_len)?;
    w.u32(parts.body.len() as u32)?;
    let flags =
        if parts.tls { FLAG_TLS } else { 0 } | if parts.body_held { FLAG_BODY_HELD } else { 0 };
    w.u32(flags)?;
    w.bytes(parts.method.as_bytes())?;
    w.bytes(parts.target.as_bytes())?;
    w.bytes(parts.authority.as_bytes())?;
    let mut written = Ok(());
    parts.headers.visit(|name, value| {
        if written.is_ok() {
            written = codec::write_header(&mut w, name, value);
        }
    });
    written?;
    w.bytes(parts.body)?;
    w.finish()
}

/// A zero-copy view of an encoded request. Every accessor borrows from the buffer.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    method: &'a str,
    target: &'a str,
    authority: &'a str,
    headers: HeaderBlock<'a>,
    body: &'a [u8],
    flags: u32,
}

impl<'a> RequestView<'a> {
    /// Checks the whole buffer once; the accessors then cannot fail.
    pub fn parse(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let version = r.u32()?;
        if version != ABI_VERSION {
            return Err(DecodeError::WrongVersion(version));
        }
        let method_len = r.u32()?;
        let target_len = r.u32()?;
        let authority_len = r.u32()?;
        let header_count = r.u32()?;
        let headers_len = r.u32()?;
        let body_len = r.u32()?;
        let flags = r.u32()?;
        let method = r.str(method_len)?;
        let target = r.str(target_len)?;
        let authority = r.str(authority_len)?;
        let headers = HeaderBlock::parse(r.bytes(headers_len)?, header_count)?;
        let body = r.bytes(body_len)?;
        r.finish()?;
        Ok(Self { method, target, authority, headers, body, flags })
    }

    /// The method, e.g. `GET`.
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// The request target: path and query, as the client sent them.
    pub fn target(&self) -> &'a str {
        self.target
    }

    /// The path: the target up to `?`.
    pub fn path(&self) -> &'a str {
        self.target.split_once('?').map_or(self.target, |(path, _)| path)
    }

    /// The query string after `?`, without it; `None` if the target has no `?`.
    pub fn query(&self) -> Option<&'a str> {
        self.target.split_once('?').map(|(_, query)| query)
    }

    /// `host[:port]`, empty if the client sent none.
    pub fn authority(&self) -> &'a str {
        self.authority
    }

    /// The headers.
    pub fn headers(&self) -> HeaderBlock<'a> {
        self.headers
    }

    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers.get(name)
    }

    /// The body.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// Whether the client connected over TLS.
    pub fn is_tls(&self) -> bool {
        self.flags & FLAG_TLS != 0
    }

    /// Whether the body was left out of this buffer and is held by the host as blob 0.
    pub fn is_body_held(&self) -> bool {
        self.flags & FLAG_BODY_HELD != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    extern crate std;
    use std::format;
    use std::vec;
    use std::vec::Vec;

    fn encode_vec(parts: &RequestParts<'_, &[(&[u8], &[u8])]>) -> Vec<u8> {
        let mut buf = vec![0; encoded_len(parts).unwrap()];
        encode(parts, &mut buf).unwrap();
        buf
    }

    fn sample() -> Vec<u8> {
        let headers: &[(&[u8], &[u8])] =
            &[(b"host", b"example.com"), (b"x-two", b"a"), (b"x-two", b"b"), (b"empty", b"")];
        encode_vec(&RequestParts {
            method: "PUT",
            target: "/a/b?c=d&e",
            authority: "example.com",
            headers,
            body: b"hello",
            tls: true,
            body_held: false,
        })
    }

    #[test]
    fn accessors() {
        let buf = sample();
        let v = RequestView::parse(&buf).unwrap();
        assert_eq!(v.method(), "PUT");
        assert_eq!(v.target(), "/a/b?c=d&e");
        assert_eq!(v.path(), "/a/b");
        assert_eq!(v.query(), Some("c=d&e"));
        assert_eq!(v.authority(), "example.com");
        assert_eq!(v.header("X-TWO"), Some(&b"a"[..]));
        assert_eq!(v.header("empty"), Some(&b""[..]));
        assert_eq!(v.header("missing"), None);
        assert_eq!(v.headers().len(), 4);
        assert_eq!(v.body(), b"hello");
        assert!(v.is_tls());
    }

    #[test]
    fn no_query() {
        let headers: &[(&[u8], &[u8])] = &[];
        let buf = encode_vec(&RequestParts {
            method: "GET",
            target: "/",
            authority: "",
            headers,
            body: b"",
            tls: false,
            body_held: false,
        });
        let v = RequestView::parse(&buf).unwrap();
        assert_eq!(v.path(), "/");
        assert_eq!(v.query(), None);
        assert!(!v.is_tls());
        assert!(v.headers().is_empty());
    }

    #[test]
    fn encode_rejects_wrong_length() {
        let headers: &[(&[u8], &[u8])] = &[];
        let parts = RequestParts {
            method: "GET",
            target: "/",
            authority: "",
            headers,
            body: b"",
            tls: false,
            body_held: false,
        };
        let len = encoded_len(&parts).unwrap();
        assert_eq!(encode(&parts, &mut vec![0; len - 1]), Err(LengthMismatch));
        assert_eq!(encode(&parts, &mut vec![0; len + 1]), Err(LengthMismatch));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let buf = sample();
        for cut in 0..buf.len() {
            assert!(RequestView::parse(&buf[..cut]).is_err(), "prefix of {cut} bytes parsed");
        }
        let mut longer = buf.clone();
        longer.push(0);
        assert_eq!(RequestView::parse(&longer).unwrap_err(), DecodeError::TrailingBytes);
    }

    #[test]
    fn wrong_layout_version() {
        let mut buf = sample();
        buf[0] = 2;
        assert_eq!(RequestView::parse(&buf).unwrap_err(), DecodeError::WrongVersion(2));
    }

    #[test]
    fn non_utf8_method() {
        let mut buf = sample();
        buf[FIXED_LEN] = 0xff;
        assert_eq!(RequestView::parse(&buf).unwrap_err(), DecodeError::NotUtf8);
    }

    proptest! {
        #[test]
        fn round_trip(
            method in "[A-Z]{1,10}",
            target in "/[a-z0-9/?=&]{0,40}",
            authority in "[a-z.:0-9]{0,20}",
            headers in proptest::collection::vec(
                ("[a-z-]{1,12}", proptest::collection::vec(any::<u8>(), 0..20)), 0..8),
            body in proptest::collection::vec(any::<u8>(), 0..200),
            tls in any::<bool>(),
            body_held in any::<bool>(),
        ) {
            let pairs: Vec<(&[u8], &[u8])> =
                headers.iter().map(|(n, v)| (n.as_bytes(), v.as_slice())).collect();
            let parts = RequestParts {
                method: &method, target: &target, authority: &authority,
                headers: pairs.as_slice(), body: &body, tls, body_held,
            };
            let buf = encode_vec(&parts);
            let v = RequestView::parse(&buf).unwrap();
            prop_assert_eq!(v.method(), method.as_str());
            prop_assert_eq!(v.target(), target.as_str());
            prop_assert_eq!(v.authority(), authority.as_str());
            prop_assert_eq!(v.body(), body.as_slice());
            prop_assert_eq!(v.is_tls(), tls);
            prop_assert_eq!(v.is_body_held(), body_held);
            let got: Vec<(&[u8], &[u8])> = v.headers().iter().collect();
            prop_assert_eq!(got, pairs);
            match v.query() {
                Some(query) => prop_assert_eq!(format!("{}?{}", v.path(), query), target),
                None => prop_assert_eq!(v.path(), target.as_str()),
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(v) = RequestView::parse(&buf) {
                // A buffer that parses must iterate cleanly too.
                prop_assert_eq!(v.headers().iter().count(), v.headers().len());
            }
        }
    }
}
