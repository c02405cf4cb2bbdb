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

#[cfg(test)]
mod tests {
    use crate::testing::TestRequest;

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
