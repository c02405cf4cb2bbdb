use alloc::vec::Vec;
use edgegate_abi::HeaderBlock;
use edgegate_abi::outcome::{self, EditOp, ErrorCode, ForwardWriter, Outcome, ResponseWriter};

/// What a worker answers: a complete response, a [`Forward`] directive, or an error.
///
/// It holds the encoded outcome buffer (see `edgegate_abi::outcome`), built in place as the
/// builder methods run, so handing it to the host copies nothing.
#[derive(Debug, Clone)]
pub struct Response {
    buf: Vec<u8>,
}

impl Response {
    /// Starts a response with `status`; add headers, then finish with
    /// [`ResponseBuilder::body`].
    ///
    /// The gateway serves statuses 200 to 599, and no header that belongs to the connection
    /// or the framing (`connection`, `transfer-encoding`, `upgrade`, a `content-length` other
    /// than the body's, …): anything else answers `500 invalid_response` (docs/abi.md).
    pub fn builder(status: u16) -> ResponseBuilder {
        ResponseBuilder { writer: ResponseWriter::with_capacity(status, 64) }
    }

    /// A response with a body and no headers.
    pub fn new(status: u16, body: &[u8]) -> Self {
        Self::builder(status).body(body)
    }

    /// A response with `content-type: application/json`.
    pub fn json(status: u16, body: &[u8]) -> Self {
        Self::builder(status).header("content-type", "application/json").body(body)
    }

    /// A response with `content-type: application/json` and the body `{"error":"CODE"}`.
    /// `code` is written as it is: a token such as `not_found`, with nothing to escape.
    pub fn json_error(status: u16, code: &str) -> Self {
        Self::json(status, &error_body(code))
    }

    /// 405 with `allow: ALLOW` and the JSON error `method_not_allowed`.
    pub fn method_not_allowed(allow: &str) -> Self {
        Self::builder(405)
            .header("allow", allow)
            .header("content-type", "application/json")
            .body(br#"{"error":"method_not_allowed"}"#)
    }

    /// A response with `content-type: text/plain; charset=utf-8`.
    pub fn text(status: u16, body: &str) -> Self {
        Self::builder(status).header("content-type", "text/plain; charset=utf-8").body(body)
    }

    /// The worker failed. The gateway answers with the status the code maps to (500 or 503)
    /// and a generic JSON error; `message` goes to the gateway log only.
    pub fn error(code: ErrorCode, message: &str) -> Self {
        Self { buf: outcome::encode_error(code, message) }
    }

    /// The decoded outcome, for inspecting a response in tests.
    pub fn outcome(&self) -> Outcome<'_> {
        // Every constructor writes a well-formed buffer, so this parses.
        Outcome::parse(&self.buf)
            .unwrap_or(Outcome::Error { code: ErrorCode::Internal, message: "unreadable outcome" })
    }

    /// The status of a response; 0 for a forward or an error.
    pub fn status(&self) -> u16 {
        match self.outcome() {
            Outcome::Response { status, .. } | Outcome::BlobResponse { status, .. } => status,
            _ => 0,
        }
    }

    /// The headers of a response; empty for a forward or an error.
    pub fn headers(&self) -> Option<HeaderBlock<'_>> {
        match self.outcome() {
            Outcome::Response { headers, .. } | Outcome::BlobResponse { headers, .. } => {
                Some(headers)
            }
            _ => None,
        }
    }

    /// The first value of header `name` (ASCII case-insensitive) of a response.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()?.get(name)
    }

    /// The body of a response; empty for a forward, an error, or a body the host holds.
    pub fn body(&self) -> &[u8] {
        match self.outcome() {
            Outcome::Response { body, .. } => body,
            _ => &[],
        }
    }

    /// The encoded outcome buffer.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// `{"error":"CODE"}`.
pub(crate) fn error_body(code: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(12 + code.len());
    body.extend_from_slice(br#"{"error":""#);
    body.extend_from_slice(code.as_bytes());
    body.extend_from_slice(br#""}"#);
    body
}

/// Builds a [`Response`]: headers first, then the body.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `body` is called"]
pub struct ResponseBuilder {
    writer: ResponseWriter,
}

impl ResponseBuilder {
    /// Adds a header. Names and values the gateway cannot send (not a valid HTTP token or
    /// value) make it answer 500 instead.
    pub fn header(mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        self.writer.header(name.as_ref(), value.as_ref());
        self
    }

    /// Finishes the response with `body`.
    pub fn body(self, body: impl AsRef<[u8]>) -> Response {
        Response { buf: self.writer.finish(body.as_ref()) }
    }

    /// Finishes the response with a body the host holds, such as an image transform's
    /// output: it is sent from the host, never copied into the worker's memory.
    pub fn body_blob(self, blob: crate::Blob) -> Response {
        Response { buf: self.writer.finish_with_blob(blob.handle()) }
    }

    /// Finishes the response with no body.
    pub fn empty(self) -> Response {
        self.body([])
    }
}

/// A directive for the gateway to proxy the request to a configured upstream, after editing its
/// headers. Convert it into a [`Response`] to return it.
///
/// ```
/// use edgegate_sdk::{Forward, Response};
/// let r: Response = Forward::to("service-a").set_header("x-user", "ada").into();
/// ```
#[derive(Debug, Clone)]
#[must_use = "a forward does nothing until it is returned as a Response"]
pub struct Forward {
    writer: ForwardWriter,
}

impl Forward {
    /// Forward to the upstream named `upstream` in the gateway's configuration.
    pub fn to(upstream: &str) -> Self {
        Self { writer: ForwardWriter::new(upstream) }
    }

    /// Replaces every value of a request header.
    pub fn set_header(mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        self.writer.edit(EditOp::Set, name.as_ref(), value.as_ref());
        self
    }

    /// Adds a value to a request header.
    pub fn append_header(mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        self.writer.edit(EditOp::Append, name.as_ref(), value.as_ref());
        self
    }

    /// Removes a request header.
    pub fn remove_header(mut self, name: impl AsRef<[u8]>) -> Self {
        self.writer.edit(EditOp::Remove, name.as_ref(), b"");
        self
    }
}

impl From<Forward> for Response {
    fn from(forward: Forward) -> Self {
        Response { buf: forward.writer.finish() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn builder_encodes_a_response() {
        let r = Response::builder(201).header("x-a", "1").header(b"x-b", b"2").body("made");
        assert_eq!(r.status(), 201);
        assert_eq!(r.header("X-A"), Some(&b"1"[..]));
        assert_eq!(r.headers().unwrap().len(), 2);
        assert_eq!(r.body(), b"made");
    }

    #[test]
    fn shorthands_set_content_type() {
        assert_eq!(
            Response::json(200, b"{}").header("content-type"),
            Some(&b"application/json"[..])
        );
        let t = Response::text(404, "nope");
        assert_eq!(t.status(), 404);
        assert_eq!(t.header("content-type"), Some(&b"text/plain; charset=utf-8"[..]));
        assert!(Response::builder(204).empty().body().is_empty());
        assert_eq!(Response::new(418, b"tea").body(), b"tea");
    }

    #[test]
    fn forward_carries_edits_in_order() {
        let r: Response = Forward::to("service-b")
            .set_header("x-a", "1")
            .append_header("x-a", "2")
            .remove_header("cookie")
            .into();
        let Outcome::Forward { upstream, edits } = r.outcome() else { panic!("not a forward") };
        assert_eq!(upstream, "service-b");
        let edits: Vec<_> = edits.iter().collect();
        assert_eq!(
            edits,
            [
                (EditOp::Set, &b"x-a"[..], &b"1"[..]),
                (EditOp::Append, b"x-a", b"2"),
                (EditOp::Remove, b"cookie", b""),
            ]
        );
        assert_eq!(r.status(), 0);
        assert!(r.body().is_empty());
    }

    #[test]
    fn error_outcome() {
        let r = Response::error(ErrorCode::Unavailable, "backend down");
        assert!(matches!(
            r.outcome(),
            Outcome::Error { code: ErrorCode::Unavailable, message: "backend down" }
        ));
        assert_eq!(r.headers(), None);
    }
}
