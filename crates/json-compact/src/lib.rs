//! The JSON compactor of the static-json workload, shared by its two workers: `echo-json`
//! (edgegate's core ABI) and `echo-json-component` (a `wasi:http/proxy` component), and by
//! the lab's native server. It validates a document (RFC 8259, nested at most
//! [`MAX_DEPTH`] deep) and leaves out the whitespace between tokens, everything else as sent
//! (key order, number and string spellings).
//!
//! A single pass over the bytes with no parse tree. Strings are scanned eight bytes at a
//! time, and the output is copied in runs between the whitespace it drops: a body that is
//! already compact comes back borrowed, with no second copy built. No serde and no
//! `core::fmt`, so a module that uses it stays small and the work is linear.

#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::borrow::Cow;
use alloc::vec::Vec;

/// How deep arrays and objects may nest.
pub const MAX_DEPTH: usize = 128;

/// The body of the 400 answer to a document that is not JSON: the error `invalid_json` and
/// the 1-based line and column (in characters) of byte `at` of `input`.
pub fn error_body(input: &[u8], at: usize) -> Vec<u8> {
    let (line, column) = line_and_column(input, at);
    let mut body = Vec::with_capacity(64);
    body.extend_from_slice(br#"{"error":"invalid_json","line":"#);
    decimal(&mut body, line);
    body.extend_from_slice(br#","column":"#);
    decimal(&mut body, column);
    body.push(b'}');
    body
}

/// `input` without insignificant whitespace (`input` itself when it has none), or the offset
/// of the first byte that makes it not JSON.
pub fn compact(input: &[u8]) -> Result<Cow<'_, [u8]>, usize> {
    if let Err(e) = core::str::from_utf8(input) {
        return Err(e.valid_up_to());
    }
    let mut c = Compactor { input, pos: 0, run: 0, out: None };
    c.value(0)?;
    c.whitespace();
    if c.pos != input.len() {
        return Err(c.pos);
    }
    Ok(match c.out {
        None => Cow::Borrowed(input),
        Some(mut out) => {
            out.extend_from_slice(&input[c.run..]);
            Cow::Owned(out)
        }
    })
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
pub fn line_and_column(input: &[u8], at: usize) -> (usize, usize) {
    let before = &input[..at.min(input.len())];
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    // Count characters, not bytes: continuation bytes do not start one.
    let column = before[line_start..].iter().filter(|&&b| b & 0xC0 != 0x80).count() + 1;
    (line, column)
}

/// Eight copies of a byte, one per lane of a `u64`.
const fn lanes(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

/// A mask with the high bit of each byte of `word` (little-endian: lane 0 is the first byte)
/// that ends a string's plain run set: a quote, a backslash or a control character (under
/// 0x20). Zero when none does. The lowest set bit is exact (the classic zero-byte test: a lane
/// can only be marked falsely by a borrow from a true match below it), so its lane is the
/// first such byte.
fn run_ends(word: u64) -> u64 {
    let ones = lanes(0x01);
    let high = lanes(0x80);
    let zero_in = |x: u64| x.wrapping_sub(ones) & !x & high;
    let below_space = word.wrapping_sub(lanes(0x20)) & !word & high;
    zero_in(word ^ lanes(b'"')) | zero_in(word ^ lanes(b'\\')) | below_space
}

struct Compactor<'a> {
    input: &'a [u8],
    pos: usize,
    /// Where the bytes not yet copied to `out` start.
    run: usize,
    /// The output so far, once there was whitespace to leave out.
    out: Option<Vec<u8>>,
}

impl Compactor<'_> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    /// Skips whitespace; the run before it is copied out, the whitespace is not.
    #[inline(always)]
    fn whitespace(&mut self) {
        if let Some(b' ' | b'\t' | b'\n' | b'\r') = self.input.get(self.pos) {
            self.skip_whitespace();
        }
    }

    #[inline(never)]
    fn skip_whitespace(&mut self) {
        let start = self.pos;
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.input.get(self.pos) {
            self.pos += 1;
        }
        if self.pos != start {
            let input = self.input;
            let out = self.out.get_or_insert_with(|| Vec::with_capacity(input.len()));
            out.extend_from_slice(&input[self.run..start]);
            self.run = self.pos;
        }
    }

    /// Steps over one byte that must be `byte`.
    fn expect(&mut self, byte: u8) -> Result<(), usize> {
        if self.peek() != Some(byte) {
            return Err(self.pos);
        }
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
                Some(b',') => self.pos += 1,
                Some(b) if b == close => return self.expect(close),
                _ => return Err(self.pos),
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), usize> {
        let rest = &self.input[self.pos..];
        match word.iter().zip(rest).position(|(w, r)| w != r) {
            Some(at) => Err(self.pos + at),
            None if rest.len() < word.len() => Err(self.input.len()),
            None => {
                self.pos += word.len();
                Ok(())
            }
        }
    }

    /// A string, kept as sent; its escapes are checked, control characters refused.
    fn string(&mut self) -> Result<(), usize> {
        self.expect(b'"')?;
        loop {
            // Eight bytes at a time to the first one that can end the plain run.
            while let Some(chunk) = self.input.get(self.pos..self.pos + 8) {
                let ends = run_ends(u64::from_le_bytes(chunk.try_into().unwrap_or_default()));
                if ends != 0 {
                    self.pos += (ends.trailing_zeros() / 8) as usize;
                    break;
                }
                self.pos += 8;
            }
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(h) if h.is_ascii_hexdigit() => self.pos += 1,
                                    _ => return Err(self.pos),
                                }
                            }
                        }
                        _ => return Err(self.pos),
                    }
                }
                Some(0x00..=0x1F) | None => return Err(self.pos),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Result<(), usize> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits()?,
            _ => return Err(self.pos),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits()?;
        }
        Ok(())
    }

    /// One or more digits.
    fn digits(&mut self) -> Result<(), usize> {
        let count = self.input[self.pos..].iter().take_while(|b| b.is_ascii_digit()).count();
        if count == 0 {
            return Err(self.pos);
        }
        self.pos += count;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::format;
    use alloc::string::ToString;

    #[test]
    fn compacts_and_keeps_everything_else() {
        let doc = b" { \"b\" : [1, -2.5e+3, null, true, false],\n \"a\": {\"x\": \"\\u00e9 \\\" \xc3\xa9\"} } ";
        let expected = "{\"b\":[1,-2.5e+3,null,true,false],\"a\":{\"x\":\"\\u00e9 \\\" é\"}}";
        assert_eq!(compact(doc).unwrap(), expected.as_bytes());
        assert_eq!(compact(b"[]").unwrap(), &b"[]"[..]);
        assert_eq!(compact(b"{ }").unwrap(), &b"{}"[..]);
        assert_eq!(compact(b" 0 ").unwrap(), &b"0"[..]);
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
    fn a_compact_body_is_answered_as_it_came() {
        let doc = br#"{"a":[1,"x y",{"b":null}],"c":"\u00e9"}"#;
        assert!(matches!(compact(doc), Ok(Cow::Borrowed(same)) if same == doc));
        assert!(matches!(compact(b" [1, 2]"), Ok(Cow::Owned(out)) if out == b"[1,2]"));
        assert!(matches!(compact(b"[1,2]\n"), Ok(Cow::Owned(out)) if out == b"[1,2]"));
    }

    #[test]
    fn strings_are_checked_at_every_offset_of_the_eight_byte_scan() {
        for len in 0..40 {
            let plain = "é".repeat(len / 2) + &"a".repeat(len % 2 + len / 2);
            for (end, ok) in [("\"", true), ("\\n\"", true), ("\\u12aF\"", true)] {
                let doc = format!("[\"{plain}{end}, 1]");
                assert_eq!(compact(doc.as_bytes()).is_ok(), ok, "{doc:?}");
            }
            for (bad, at) in [("\u{1}", 0), ("\t", 0), ("\\q", 1), ("\\u12g4", 4)] {
                let doc = format!("[\"{plain}{bad}\"]");
                assert_eq!(compact(doc.as_bytes()), Err(2 + plain.len() + at), "{doc:?}");
            }
            let open = format!("[\"{plain}");
            assert_eq!(compact(open.as_bytes()), Err(open.len()));
        }
    }

    #[test]
    fn the_error_names_the_line_and_column_in_characters() {
        let doc = "{\n  \"é\": tru }".as_bytes();
        let at = compact(doc).unwrap_err();
        let body: serde_json::Value = serde_json::from_slice(&error_body(doc, at)).unwrap();
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
            assert!(compact(bad).is_err(), "{:?}", alloc::string::String::from_utf8_lossy(bad));
            assert!(serde_json::from_slice::<serde_json::Value>(bad).is_err(), "serde agrees");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        assert_eq!(compact(deep.as_bytes()), Err(MAX_DEPTH));
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(compact(fine.as_bytes()).is_ok());
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 1234, usize::MAX] {
            let mut out = Vec::new();
            decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
