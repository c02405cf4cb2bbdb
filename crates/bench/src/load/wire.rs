//! The load generator's HTTP/1.1 client: one keep-alive connection, a request encoded once
//! and written as bytes, the response parsed in place (`httparse`).
//!
//! A general client (hyper's) hands each request to a connection task through a channel and
//! the answer back through another: two task switches and a few µs a request, which a
//! measuring client adds to every latency it reports. wrk, the outside tool the lab is checked
//! against, writes and parses on the socket itself; so does this. It reads what the lab's
//! runtimes send: `content-length` or chunked bodies, and `connection: close`.

use std::net::SocketAddr;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::RequestTemplate;

/// Response heads larger than this, or with more headers than [`MAX_HEADERS`], are errors.
const MAX_HEAD: usize = 16 << 10;
const MAX_HEADERS: usize = 64;

/// A request, encoded once: head and body.
pub(super) fn encode(template: &RequestTemplate, host: &str) -> Bytes {
    let mut out = Vec::with_capacity(128 + template.body.len());
    out.extend_from_slice(template.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(template.uri.path_and_query().map_or("/", |p| p.as_str()).as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &template.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !template.body.is_empty() {
        out.extend_from_slice(format!("content-length: {}\r\n", template.body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&template.body);
    out.into()
}

/// A response that is not HTTP/1.1, or not one the lab can frame.
fn malformed(why: &'static str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

/// One keep-alive connection.
pub(super) struct Wire {
    stream: TcpStream,
    buf: BytesMut,
}

/// One response: its status, and whether the server will close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Answer {
    pub status: u16,
    pub closes: bool,
}

impl Wire {
    /// Connects, with Nagle off (the requests are small and each is waited for).
    pub async fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self { stream, buf: BytesMut::with_capacity(8 << 10) })
    }

    /// Writes `request` and reads its whole response (an error when the connection fails or
    /// closes first, or the response is malformed).
    pub async fn exchange(&mut self, request: &[u8]) -> std::io::Result<Answer> {
        self.stream.write_all(request).await?;
        loop {
            if let Some((answer, len)) = parse(&self.buf)? {
                self.buf.advance(len);
                return Ok(answer);
            }
            if self.buf.len() > MAX_HEAD && head_len(&self.buf).is_none() {
                return Err(malformed("response head too large"));
            }
            self.buf.reserve(8 << 10);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

fn head_len(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// The response at the start of `buf` and its length, once it is all there.
pub(super) fn parse(buf: &[u8]) -> std::io::Result<Option<(Answer, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(buf) {
        Ok(httparse::Status::Complete(head)) => head,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(malformed("not an HTTP/1.1 response head")),
    };
    let status = response.code.unwrap_or_default();
    let mut length = None;
    let mut chunked = false;
    let mut closes = response.version == Some(0);
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(h.value).ok();
            length = Some(
                text.and_then(|t| t.trim().parse::<usize>().ok())
                    .ok_or(malformed("bad content-length"))?,
            );
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h.value.eq_ignore_ascii_case(b"chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            closes = h.value.eq_ignore_ascii_case(b"close");
        }
    }
    let answer = Answer { status, closes };
    let no_body = status == 204 || status == 304 || (100..200).contains(&status);
    let end = if no_body {
        Some(head)
    } else if chunked {
        chunked_end(buf, head)?
    } else if let Some(length) = length {
        (buf.len() >= head + length).then_some(head + length)
    } else {
        return Err(malformed("a body with no length (read to close)"));
    };
    Ok(end.map(|end| (answer, end)))
}

/// Where a chunked body that starts at `at` ends (trailers included), once it is all there.
fn chunked_end(buf: &[u8], mut at: usize) -> std::io::Result<Option<usize>> {
    loop {
        let (size_len, size) = match httparse::parse_chunk_size(&buf[at..]) {
            Ok(httparse::Status::Complete(found)) => found,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(malformed("bad chunk size")),
        };
        at += size_len;
        if size == 0 {
            // The last chunk: optional trailers, then an empty line.
            let rest = &buf[at..];
            if rest.starts_with(b"\r\n") {
                return Ok(Some(at + 2));
            }
            return Ok(head_len(rest).map(|end| at + end));
        }
        let size = usize::try_from(size).map_err(|_| malformed("chunk too large"))?;
        let next = at.checked_add(size + 2).ok_or(malformed("chunk too large"))?;
        if buf.len() < next {
            return Ok(None);
        }
        if &buf[next - 2..next] != b"\r\n" {
            return Err(malformed("chunk not followed by CRLF"));
        }
        at = next;
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderName, HeaderValue, Method, Uri};

    use super::*;

    fn parsed(bytes: &[u8]) -> Option<(Answer, usize)> {
        parse(bytes).unwrap()
    }

    #[test]
    fn encodes_the_request_line_headers_and_body() {
        let template = RequestTemplate {
            method: Method::POST,
            uri: Uri::from_static("/echo?x=1"),
            headers: vec![(
                HeaderName::from_static("content-type"),
                HeaderValue::from_static("application/json"),
            )],
            body: Bytes::from_static(b"{}"),
            expect: 200,
        };
        assert_eq!(
            &encode(&template, "127.0.0.1:8080")[..],
            b"POST /echo?x=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\ncontent-type: application/json\r\n\
              content-length: 2\r\n\r\n{}"
        );
        let get = RequestTemplate { method: Method::GET, body: Bytes::new(), ..template };
        assert!(!encode(&get, "h").windows(14).any(|w| w == b"content-length"));
    }

    #[test]
    fn a_response_is_whole_only_when_its_body_is() {
        let full = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
        for cut in 0..full.len() {
            assert_eq!(parsed(&full[..cut]), None, "cut at {cut}");
        }
        let ok = Answer { status: 200, closes: false };
        assert_eq!(parsed(full), Some((ok, full.len())));
        // The next response, already read, is left for the next exchange.
        let two = [&full[..], b"HTTP/1.1 404 Not Found\r\n"].concat();
        assert_eq!(parsed(&two), Some((ok, full.len())));
        let close =
            b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parsed(close), Some((Answer { status: 503, closes: true }, close.len())));
        let no_content = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(parsed(no_content).map(|(a, n)| (a.status, n)), Some((204, no_content.len())));
    }

    #[test]
    fn chunked_bodies_end_at_the_last_chunk_and_its_trailers() {
        let body = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\n\r\n";
        for cut in 0..body.len() {
            assert_eq!(parsed(&body[..cut]), None, "cut at {cut}");
        }
        assert_eq!(parsed(body).map(|(a, n)| (a.status, n)), Some((200, body.len())));
        let trailers =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx-sum: 1\r\n\r\n";
        assert_eq!(parsed(trailers).map(|(_, n)| n), Some(trailers.len()));
    }

    #[test]
    fn malformed_responses_are_errors_not_hangs() {
        let bad: [&[u8]; 4] = [
            b"SMTP ready\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhelloXX",
            b"HTTP/1.1 200 OK\r\n\r\nread until close",
        ];
        for bytes in bad {
            assert!(parse(bytes).is_err(), "{:?}", String::from_utf8_lossy(bytes));
        }
    }
}
