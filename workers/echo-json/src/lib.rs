//! `echo-json`: the static-json workload. POST a JSON document and get it back validated and
//! compact: whitespace between tokens removed, everything else as sent (key order, number and
//! string spellings). Anything that is not JSON (RFC 8259, nested at most 128 deep) gets 400
//! with a JSON error naming the line and column.
//!
//! ```text
//! curl --data '{"b": [1, 2.5, null], "a": "x"}' localhost:8080/echo
//! {"b":[1,2.5,null],"a":"x"}
//! ```
//!
//! A single pass over the bytes with no parse tree and no allocation but the output, so the
//! module stays small (no serde) and the work is linear.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;

use edgegate_sdk::{Request, Response};

/// How deep arrays and objects may nest.
pub const MAX_DEPTH: usize = 128;

/// Validates and compacts the JSON body.
pub fn handle(req: &Request) -> Response {
    if req.method() != "POST" {
        return Response::method_not_allowed("POST");
    }
    match compact(req.body()) {
        Ok(body) => Response::json(200, &body),
        Err(at) => {
            let (line, column) = line_and_column(req.body(), at);
            let mut body = Vec::with_capacity(64);
            body.extend_from_slice(br#"{"error":"invalid_json","line":"#);
            decimal(&mut body, line);
            body.extend_from_slice(br#","column":"#);
            decimal(&mut body, column);
            body.push(b'}');
            Response::json(400, &body)
        }
    }
}

edgegate_sdk::export!(handle);

/// `input` without insignificant whitespace, or the offset of the first byte that makes it
/// not JSON.
pub fn compact(input: &[u8]) -> Result<Vec<u8>, usize> {
    if let Err(e) = core::str::from_utf8(input) {
        return Err(e.valid_up_to());
    }
    let mut c = Compactor { input, pos: 0, out: Vec::with_capacity(input.len()) };
    c.value(0)?;
    c.whitespace();
    if c.pos != input.len() {
        return Err(c.pos);
    }
    Ok(c.out)
}

/// Appends `n` in decimal (without `core::fmt`, which would double the module's size).
fn decimal(out: &mut Vec<u8>, mut n: usize) {
    let start = out.len();
    loop {
        out.push(b'0' + (n % 10) as u8);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out[start..].reverse();
}

/// 1-based line and column (in characters) of byte `at`.
fn line_and_column(input: &[u8], at: usize) -> (usize, usize) {
    let before = &input[..at.min(input.len())];
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    // Count characters, not bytes: continuation bytes do not start one.
    let column = before[line_start..].iter().filter(|&&b| b & 0xC0 != 0x80).count() + 1;
    (line, column)
}

struct Compactor<'a> {
    input: &'a [u8],
    pos: usize,
    out: Vec<u8>,
}

impl Compactor<'_> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Copies one byte that must be `byte`.
    fn expect(&mut self, byte: u8) -> Result<(), usize> {
        if self.peek() != Some(byte) {
            return Err(self.pos);
        }
        self.out.push(byte);
        self.pos += 1;
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<(), usize> {
        self.whitespace();
        match self.peek() {
            Some(b'{') => self.container(depth, b'}', true),
            Some(b'[') => self.container(depth, b']', false),
            Some(b'"') => self.string(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.pos),
        }
    }

    /// An object (members `"key": value`) or an array, closed by `close`.
    fn container(&mut self, depth: usize, close: u8, object: bool) -> Result<(), usize> {
        if depth >= MAX_DEPTH {
            return Err(self.pos);
        }
        self.out.push(self.input[self.pos]);
        self.pos += 1;
        self.whitespace();
        if self.peek() == Some(close) {
            return self.expect(close);
        }
        loop {
            if object {
                self.whitespace();
                self.string()?;
                self.whitespace();
                self.expect(b':')?;
            }
            self.value(depth + 1)?;
            self.whitespace();
            match self.peek() {
                Some(b',') => self.expect(b',')?,
                Some(b) if b == close => return self.expect(close),
                _ => return Err(self.pos),
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), usize> {
        for &b in word {
            self.expect(b)?;
        }
        Ok(())
    }

    /// A string, copied as sent; its escapes are checked, control characters refused.
    fn string(&mut self) -> Result<(), usize> {
        self.expect(b'"')?;
        loop {
            match self.peek() {
                Some(b'"') => return self.expect(b'"'),
                Some(b'\\') => {
                    self.expect(b'\\')?;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.out.push(self.input[self.pos]);
                            self.pos += 1;
                        }
                        Some(b'u') => {
                            self.expect(b'u')?;
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(h) if h.is_ascii_hexdigit() => self.expect(h)?,
                                    _ => return Err(self.pos),
                                }
                            }
                        }
                        _ => return Err(self.pos),
                    }
                }
                Some(0x00..=0x1F) | None => return Err(self.pos),
                Some(b) => self.expect(b)?,
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Result<(), usize> {
        if self.peek() == Some(b'-') {
            self.expect(b'-')?;
        }
        match self.peek() {
            Some(b'0') => self.expect(b'0')?,
            Some(b'1'..=b'9') => self.digits()?,
            _ => return Err(self.pos),
        }
        if self.peek() == Some(b'.') {
            self.expect(b'.')?;
            self.digits()?;
        }
        if let Some(e @ (b'e' | b'E')) = self.peek() {
            self.expect(e)?;
            if let Some(sign @ (b'+' | b'-')) = self.peek() {
                self.expect(sign)?;
            }
            self.digits()?;
        }
        Ok(())
    }

    /// One or more digits.
    fn digits(&mut self) -> Result<(), usize> {
        if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return Err(self.pos);
        }
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            self.expect(d)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::testing::TestRequest;

    fn post(body: &[u8]) -> Response {
        handle(&TestRequest::new("POST", "/echo").body(body).request())
    }

    #[test]
    fn compacts_and_keeps_everything_else() {
        let r = post(b" { \"b\" : [1, -2.5e+3, null, true, false],\n \"a\": {\"x\": \"\\u00e9 \\\" \xc3\xa9\"} } ");
        assert_eq!(r.status(), 200);
        assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
        let expected = "{\"b\":[1,-2.5e+3,null,true,false],\"a\":{\"x\":\"\\u00e9 \\\" é\"}}";
        assert_eq!(r.body(), expected.as_bytes());
        assert_eq!(post(b"[]").body(), b"[]");
        assert_eq!(post(b"{ }").body(), b"{}");
        assert_eq!(post(b" 0 ").body(), b"0");
    }

    #[test]
    fn what_serde_json_accepts_it_accepts_and_leaves_equal() {
        for doc in [
            r#"{"items":[{"id":1,"name":"a","tags":["x","y"],"price":1.5,"ok":true}],"note":"n"}"#,
            r#"[0,-0,1e5,1E-5,0.25,"\/\b\f\n\r\t\\","\ud83d\ude00"]"#,
        ] {
            let ours = compact(doc.as_bytes()).unwrap();
            let theirs: serde_json::Value = serde_json::from_slice(doc.as_bytes()).unwrap();
            assert_eq!(serde_json::from_slice::<serde_json::Value>(&ours).unwrap(), theirs);
        }
    }

    #[test]
    fn invalid_json_is_a_400_naming_the_place() {
        let r = post(b"{\n  \"a\": tru }");
        assert_eq!(r.status(), 400);
        let body: serde_json::Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(body["error"], "invalid_json");
        assert_eq!((body["line"].as_u64(), body["column"].as_u64()), (Some(2), Some(11)));
    }

    #[test]
    fn what_is_not_json_is_refused() {
        for bad in [
            &b""[..],
            b"{} x",
            b"{\"a\" 1}",
            b"{\"a\":1,}",
            b"[1,]",
            b"[01]",
            b"[1.]",
            b"[.5]",
            b"[1e]",
            b"[-]",
            b"\"tab\there\"",
            b"\"\\x\"",
            b"\"\\u12g4\"",
            b"\"open",
            b"{1:2}",
            b"\xff",
            b"nul",
            b"[true false]",
        ] {
            assert!(compact(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
            assert!(serde_json::from_slice::<serde_json::Value>(bad).is_err(), "serde agrees");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        assert_eq!(post(deep.as_bytes()).status(), 400);
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(post(fine.as_bytes()).status(), 200);
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 1234, usize::MAX] {
            let mut out = Vec::new();
            decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    #[test]
    fn only_post() {
        let r = handle(&TestRequest::new("GET", "/echo").request());
        assert_eq!(r.status(), 405);
        assert_eq!(r.header("allow"), Some(&b"POST"[..]));
    }
}
