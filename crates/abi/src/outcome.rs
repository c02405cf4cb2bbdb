//! The outcome buffer: what a guest returns for one request.
//!
//! Every outcome starts with a `u32` kind. The guest returns `(ptr << 32) | len` of the buffer
//! from [`crate::EXPORT_HANDLE`].
//!
//! ```text
//! kind 1, a response                 kind 2, forward to an upstream    kind 3, an error
//! 0   kind = 1                       0   kind = 2                      0   kind = 3
//! 4   status (a u16)                 4   upstream_len                  4   code (ErrorCode)
//! 8   header_count                   8   edit_count                    8   message_len
//! 12  headers_len                    12  edits_len                     12  message (UTF-8)
//! 16  body_len                       16  upstream name (UTF-8)
//! 20  header block | body                | edit block
//! ```
//!
//! Kind 4 is a response whose body the host holds (a blob, such as an image transform's
//! output): kind 1's layout, with the body length's slot holding the blob's handle and no
//! body bytes after the header block, so the body never passes through guest memory.
//!
//! An edit block is `edit_count` entries `[op: u32][name_len][value_len][name][value]`, with
//! `op` an [`EditOp`]. An error's message goes to the gateway log, never to the client.

use crate::DecodeError;
use crate::codec::{HeaderBlock, Reader};

/// The outcome kind of a complete response.
pub const KIND_RESPONSE: u32 = 1;
/// The outcome kind of a forward directive.
pub const KIND_FORWARD: u32 = 2;
/// The outcome kind of an error.
pub const KIND_ERROR: u32 = 3;
/// The outcome kind of a response whose body is a blob the host holds.
pub const KIND_BLOB_RESPONSE: u32 = 4;

/// What a guest can report instead of a response. The host turns each into a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    /// The worker failed; the host answers 500.
    Internal = 1,
    /// The worker could not decode the request buffer; the host answers 500.
    BadRequestBuffer = 2,
    /// The worker cannot serve now and a retry may succeed; the host answers 503.
    Unavailable = 3,
}

impl ErrorCode {
    /// Interprets the code field; unknown codes read as [`ErrorCode::Internal`].
    pub const fn from_code(code: u32) -> Self {
        match code {
            2 => Self::BadRequestBuffer,
            3 => Self::Unavailable,
            _ => Self::Internal,
        }
    }
}

/// How a forward directive edits one request header before the host proxies the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EditOp {
    /// Replace every value of the header with this one.
    Set = 1,
    /// Add a value, keeping the existing ones.
    Append = 2,
    /// Remove the header; the value is ignored (send it empty).
    Remove = 3,
}

impl EditOp {
    fn from_code(code: u32) -> Result<Self, DecodeError> {
        match code {
            1 => Ok(Self::Set),
            2 => Ok(Self::Append),
            3 => Ok(Self::Remove),
            _ => Err(DecodeError::BadValue),
        }
    }
}

/// A decoded outcome, borrowing from the guest's buffer.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// A complete response.
    Response {
        /// The status code: any `u16` decodes; the gateway serves 200 to 599 from a worker.
        status: u16,
        /// The response headers.
        headers: HeaderBlock<'a>,
        /// The response body.
        body: &'a [u8],
    },
    /// Proxy the request to a named upstream, after editing its headers.
    Forward {
        /// The upstream's name in the gateway configuration.
        upstream: &'a str,
        /// The header edits, in order.
        edits: EditBlock<'a>,
    },
    /// A complete response whose body is a blob the host holds (by handle).
    BlobResponse {
        /// The status code, as for [`Outcome::Response`].
        status: u16,
        /// The response headers.
        headers: HeaderBlock<'a>,
        /// The handle of the blob that is the body.
        blob: u32,
    },
    /// The worker failed.
    Error {
        /// What kind of failure.
        code: ErrorCode,
        /// Detail for the log.
        message: &'a str,
    },
}

impl<'a> Outcome<'a> {
    /// Decodes and checks a whole outcome buffer.
    pub fn parse(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let outcome = match r.u32()? {
            KIND_RESPONSE => {
                let status = u16::try_from(r.u32()?).map_err(|_| DecodeError::BadValue)?;
                let header_count = r.u32()?;
                let headers_len = r.u32()?;
                let body_len = r.u32()?;
                let headers = HeaderBlock::parse(r.bytes(headers_len)?, header_count)?;
                let body = r.bytes(body_len)?;
                Outcome::Response { status, headers, body }
            }
            KIND_BLOB_RESPONSE => {
                let status = u16::try_from(r.u32()?).map_err(|_| DecodeError::BadValue)?;
                let header_count = r.u32()?;
                let headers_len = r.u32()?;
                let blob = r.u32()?;
                let headers = HeaderBlock::parse(r.bytes(headers_len)?, header_count)?;
                Outcome::BlobResponse { status, headers, blob }
            }
            KIND_FORWARD => {
                let upstream_len = r.u32()?;
                let edit_count = r.u32()?;
                let edits_len = r.u32()?;
                let upstream = r.str(upstream_len)?;
                let edits = EditBlock::parse(r.bytes(edits_len)?, edit_count)?;
                Outcome::Forward { upstream, edits }
            }
            KIND_ERROR => {
                let code = ErrorCode::from_code(r.u32()?);
                let message_len = r.u32()?;
                let message = r.str(message_len)?;
                Outcome::Error { code, message }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        };
        r.finish()?;
        Ok(outcome)
    }
}

/// A validated block of header edits.
#[derive(Debug, Clone, Copy)]
pub struct EditBlock<'a> {
    bytes: &'a [u8],
    count: u32,
}

impl<'a> EditBlock<'a> {
    fn parse(bytes: &'a [u8], count: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        for _ in 0..count {
            EditOp::from_code(r.u32()?)?;
            r.entry()?;
        }
        r.finish()?;
        Ok(Self { bytes, count })
    }

    /// The number of edits.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are no edits.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The edits in order, as `(op, name, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (EditOp, &'a [u8], &'a [u8])> + 'a {
        let mut r = Reader::new(self.bytes);
        (0..self.count).map_while(move |_| {
            // Validated by `parse`; a failure would only end the iteration.
            let op = EditOp::from_code(r.u32().ok()?).ok()?;
            let (name, value) = r.entry().ok()?;
            Some((op, name, value))
        })
    }
}

pub use writer::{ForwardWriter, ResponseWriter, encode_error};

mod writer {
    use super::*;
    use alloc::vec::Vec;

    fn put_u32(buf: &mut Vec<u8>, value: u32) {
        buf.extend_from_slice(&value.to_le_bytes());
    }

    fn patch_u32(buf: &mut [u8], at: usize, value: u32) {
        if let Some(slot) = buf.get_mut(at..at + 4) {
            slot.copy_from_slice(&value.to_le_bytes());
        }
    }

    // Lengths are cast to u32: on wasm32 no slice is longer than that, and natively a longer
    // one would only produce a buffer the host rejects.
    fn put_entry(buf: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        put_u32(buf, name.len() as u32);
        put_u32(buf, value.len() as u32);
        buf.extend_from_slice(name);
        buf.extend_from_slice(value);
    }

    /// Builds a response outcome incrementally: status, then headers, then the body.
    #[derive(Debug, Clone)]
    pub struct ResponseWriter {
        buf: Vec<u8>,
        header_count: u32,
    }

    impl ResponseWriter {
        const FIXED_LEN: usize = 20;

        /// Starts a response with `status`, reserving room for `capacity` more bytes.
        pub fn with_capacity(status: u16, capacity: usize) -> Self {
            let mut buf = Vec::with_capacity(Self::FIXED_LEN + capacity);
            put_u32(&mut buf, KIND_RESPONSE);
            put_u32(&mut buf, u32::from(status));
            buf.extend_from_slice(&[0; 12]);
            Self { buf, header_count: 0 }
        }

        /// Appends a header.
        pub fn header(&mut self, name: &[u8], value: &[u8]) {
            put_entry(&mut self.buf, name, value);
            self.header_count += 1;
        }

        /// Changes the status.
        pub fn set_status(&mut self, status: u16) {
            patch_u32(&mut self.buf, 4, u32::from(status));
        }

        /// Appends the body and returns the finished outcome buffer.
        pub fn finish(mut self, body: &[u8]) -> Vec<u8> {
            self.close(body.len() as u32);
            self.buf.extend_from_slice(body);
            self.buf
        }

        /// Finishes a response whose body is the host's blob `blob` (kind 4).
        pub fn finish_with_blob(mut self, blob: u32) -> Vec<u8> {
            patch_u32(&mut self.buf, 0, KIND_BLOB_RESPONSE);
            self.close(blob);
            self.buf
        }

        /// Fills in the header count, the header block's length and the last fixed field.
        fn close(&mut self, last: u32) {
            let headers_len = (self.buf.len() - Self::FIXED_LEN) as u32;
            patch_u32(&mut self.buf, 8, self.header_count);
            patch_u32(&mut self.buf, 12, headers_len);
            patch_u32(&mut self.buf, 16, last);
        }
    }

    /// Builds a forward outcome: an upstream name and header edits.
    #[derive(Debug, Clone)]
    pub struct ForwardWriter {
        buf: Vec<u8>,
        edit_count: u32,
        fixed_len: usize,
    }

    impl ForwardWriter {
        /// Starts a forward directive to `upstream`.
        pub fn new(upstream: &str) -> Self {
            let mut buf = Vec::with_capacity(16 + upstream.len() + 64);
            put_u32(&mut buf, KIND_FORWARD);
            put_u32(&mut buf, upstream.len() as u32);
            buf.extend_from_slice(&[0; 8]);
            buf.extend_from_slice(upstream.as_bytes());
            let fixed_len = buf.len();
            Self { buf, edit_count: 0, fixed_len }
        }

        /// Appends a header edit.
        pub fn edit(&mut self, op: EditOp, name: &[u8], value: &[u8]) {
            put_u32(&mut self.buf, op as u32);
            put_entry(&mut self.buf, name, value);
            self.edit_count += 1;
        }

        /// Returns the finished outcome buffer.
        pub fn finish(mut self) -> Vec<u8> {
            let edits_len = (self.buf.len() - self.fixed_len) as u32;
            patch_u32(&mut self.buf, 8, self.edit_count);
            patch_u32(&mut self.buf, 12, edits_len);
            self.buf
        }
    }

    /// Encodes an error outcome.
    pub fn encode_error(code: ErrorCode, message: &str) -> Vec<u8> {
        let mut buf = Vec::with_capacity(12 + message.len());
        put_u32(&mut buf, KIND_ERROR);
        put_u32(&mut buf, code as u32);
        put_u32(&mut buf, message.len() as u32);
        buf.extend_from_slice(message.as_bytes());
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    #[test]
    fn response_round_trip() {
        let mut w = ResponseWriter::with_capacity(200, 0);
        w.header(b"content-type", b"application/json");
        w.header(b"x-a", b"1");
        w.set_status(201);
        let buf = w.finish(b"{\"ok\":true}");
        let Outcome::Response { status, headers, body } = Outcome::parse(&buf).unwrap() else {
            panic!("not a response");
        };
        assert_eq!(status, 201);
        assert_eq!(headers.len(), 2);
        assert_eq!(headers.get("Content-Type"), Some(&b"application/json"[..]));
        assert_eq!(body, b"{\"ok\":true}");
    }

    #[test]
    fn blob_response_round_trip() {
        let mut w = ResponseWriter::with_capacity(200, 0);
        w.header(b"content-type", b"image/jpeg");
        let buf = w.finish_with_blob(3);
        let Outcome::BlobResponse { status, headers, blob } = Outcome::parse(&buf).unwrap() else {
            panic!("not a blob response");
        };
        assert_eq!((status, blob), (200, 3));
        assert_eq!(headers.get("content-type"), Some(&b"image/jpeg"[..]));
        // No body bytes may follow: a trailing byte is refused like any other.
        let mut longer = buf.clone();
        longer.push(0);
        assert!(Outcome::parse(&longer).is_err());
    }

    #[test]
    fn forward_round_trip() {
        let mut w = ForwardWriter::new("service-a");
        w.edit(EditOp::Set, b"x-user", b"alice");
        w.edit(EditOp::Remove, b"authorization", b"");
        let buf = w.finish();
        let Outcome::Forward { upstream, edits } = Outcome::parse(&buf).unwrap() else {
            panic!("not a forward");
        };
        assert_eq!(upstream, "service-a");
        let edits: Vec<_> = edits.iter().collect();
        assert_eq!(
            edits,
            [(EditOp::Set, &b"x-user"[..], &b"alice"[..]), (EditOp::Remove, b"authorization", b"")]
        );
    }

    #[test]
    fn error_round_trip() {
        let buf = encode_error(ErrorCode::Unavailable, "try later");
        let Outcome::Error { code, message } = Outcome::parse(&buf).unwrap() else {
            panic!("not an error");
        };
        assert_eq!(code, ErrorCode::Unavailable);
        assert_eq!(message, "try later");
    }

    #[test]
    fn bad_values_are_rejected() {
        assert_eq!(Outcome::parse(&[9, 0, 0, 0]).unwrap_err(), DecodeError::UnknownKind(9));
        let mut buf = ResponseWriter::with_capacity(0, 0).finish(b"");
        buf[4..8].copy_from_slice(&65536u32.to_le_bytes());
        assert_eq!(Outcome::parse(&buf).unwrap_err(), DecodeError::BadValue, "not a u16");
        let mut w = ForwardWriter::new("u");
        w.edit(EditOp::Set, b"a", b"b");
        let mut buf = w.finish();
        let op_at = 16 + 1;
        buf[op_at] = 7;
        assert_eq!(Outcome::parse(&buf).unwrap_err(), DecodeError::BadValue);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let mut w = ResponseWriter::with_capacity(200, 0);
        w.header(b"a", b"b");
        let buf = w.finish(b"body");
        for cut in 0..buf.len() {
            assert!(Outcome::parse(&buf[..cut]).is_err(), "prefix of {cut} bytes parsed");
        }
        let mut longer = buf;
        longer.push(0);
        assert_eq!(Outcome::parse(&longer).unwrap_err(), DecodeError::TrailingBytes);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(Outcome::Response { headers, .. }) = Outcome::parse(&buf) {
                prop_assert_eq!(headers.iter().count(), headers.len());
            }
        }

        #[test]
        fn response_headers_round_trip(
            status in any::<u16>(),
            headers in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..10),
                 proptest::collection::vec(any::<u8>(), 0..10)), 0..6),
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut w = ResponseWriter::with_capacity(status, 0);
            for (n, v) in &headers {
                w.header(n, v);
            }
            let buf = w.finish(&body);
            let Outcome::Response { status: s, headers: h, body: b } = Outcome::parse(&buf).unwrap()
            else { panic!("not a response") };
            prop_assert_eq!(s, status);
            prop_assert_eq!(b, body.as_slice());
            let got: Vec<(Vec<u8>, Vec<u8>)> = h.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(got, headers);
        }
    }
}
