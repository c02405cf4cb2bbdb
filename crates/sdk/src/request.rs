use edgegate_abi::request::RequestView;
use edgegate_abi::{DecodeError, HeaderBlock};

/// The request, viewed in place in the buffer the host wrote: every accessor borrows, none
/// copies or allocates.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    view: RequestView<'a>,
}

impl<'a> Request<'a> {
    /// Checks an encoded request buffer (see `edgegate_abi::request`).
    pub fn parse(buf: &'a [u8]) -> Result<Self, DecodeError> {
        RequestView::parse(buf).map(|view| Self { view })
    }

    /// The method, e.g. `GET`.
    pub fn method(&self) -> &'a str {
        self.view.method()
    }

    /// The path, without the query: `/a/b` for `/a/b?c=d`.
    pub fn path(&self) -> &'a str {
        self.view.path()
    }

    /// The query string without `?`; `None` if there is none.
    pub fn query(&self) -> Option<&'a str> {
        self.view.query()
    }

    /// The raw value of the first query parameter named `name` (not percent-decoded).
    /// A parameter without `=` has the value `""`.
    pub fn query_param(&self, name: &str) -> Option<&'a str> {
        self.query()?.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key == name).then_some(value)
        })
    }

    /// The path and query as the client sent them.
    pub fn target(&self) -> &'a str {
        self.view.target()
    }

    /// `host[:port]` of the request, empty if the client sent none.
    pub fn host(&self) -> &'a str {
        self.view.authority()
    }

    /// The first value of header `name` (ASCII case-insensitive), if it is UTF-8.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.header_bytes(name).and_then(|v| core::str::from_utf8(v).ok())
    }

    /// The first value of header `name` (ASCII case-insensitive), as bytes.
    pub fn header_bytes(&self, name: &str) -> Option<&'a [u8]> {
        self.view.header(name)
    }

    /// Every header, in the order received; names are lower case.
    pub fn headers(&self) -> HeaderBlock<'a> {
        self.view.headers()
    }

    /// The body; empty when the worker left it in the host (see [`Request::is_body_held`]).
    pub fn body(&self) -> &'a [u8] {
        self.view.body()
    }

    /// Whether the body was left in the host as [`crate::Blob::BODY`] (a worker exported with
    /// `export!(handler, body = host)`), rather than copied into the worker's memory.
    pub fn is_body_held(&self) -> bool {
        self.view.is_body_held()
    }

    /// Whether the client connected over TLS.
    pub fn is_tls(&self) -> bool {
        self.view.is_tls()
    }
}
