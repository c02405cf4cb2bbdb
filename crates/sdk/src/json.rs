//! A strict, zero-copy JSON reader: JOSE headers, JWT claims, JWKS files, and any document a
//! worker or the host must read exactly as written.
//!
//! [`parse`] checks a whole document once against RFC 8259 (UTF-8, string escapes, surrogate
//! pairs, number grammar, nesting at most [`MAX_DEPTH`]) and refuses an object that names a key
//! twice, at any depth: RFC 7515 §4 lets a JWS parser either reject duplicate header names or
//! take the last one, and a gateway that read the first while the issuer meant the last would
//! check a different token than was signed. Values borrow from the input; strings are only
//! unescaped when asked.
//!
//! ```text
//!  bytes ──parse──▶ Value::Object(Object { raw: "{…}" })
//!                      │ get("exp") / iter(): re-scan the raw text (already validated)
//!                      ▼
//!                   Value::Number(Number { raw: "1300819380" }) ─▶ as_seconds()
//! ```
//!
//! Why not `serde-json-core`: it cannot see duplicates among keys it does not know, and a
//! claim set is open-ended. This reader is small (it is in every auth worker) and is tested
//! against `serde_json` on random documents.

use alloc::vec::Vec;
use core::cmp::Ordering;

/// Objects and arrays nest at most this deep (a JWT's claims rarely pass 3).
pub const MAX_DEPTH: usize = 16;

/// Why a document is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON: a syntax error, bad UTF-8, a bad escape or number, trailing bytes.
    Syntax,
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// An object names the same key twice (compared after unescaping).
    DuplicateKey,
}

/// A JSON value, borrowing from the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(Number<'a>),
    /// A string.
    String(JsonStr<'a>),
    /// An array.
    Array(Array<'a>),
    /// An object.
    Object(Object<'a>),
}

impl<'a> Value<'a> {
    /// The value as an object, if it is one.
    pub fn as_object(self) -> Option<Object<'a>> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_json_str(self) -> Option<JsonStr<'a>> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The strings of a value that is a string (one) or an array (each string element; others
    /// are skipped); none for any other value.
    pub fn strings(self) -> impl Iterator<Item = JsonStr<'a>> + 'a {
        let (single, array) = match self {
            Value::String(s) => (Some(s), None),
            Value::Array(a) => (None, Some(a)),
            _ => (None, None),
        };
        single
            .into_iter()
            .chain(array.into_iter().flat_map(Array::iter).filter_map(Value::as_json_str))
    }

    /// The value's JSON text, exactly as written in the document.
    pub fn raw(self) -> &'a str {
        match self {
            Value::Null => "null",
            Value::Bool(true) => "true",
            Value::Bool(false) => "false",
            Value::Number(n) => n.raw,
            Value::String(s) => s.quoted,
            Value::Array(a) => a.raw,
            Value::Object(o) => o.raw,
        }
    }
}

/// A JSON string. `raw()` is the text between the quotes, escapes and all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    /// With its quotes.
    quoted: &'a str,
    escaped: bool,
}

impl<'a> JsonStr<'a> {
    /// The text between the quotes, escapes not decoded.
    pub fn raw(&self) -> &'a str {
        &self.quoted[1..self.quoted.len() - 1]
    }

    /// The string itself when it has no escapes (the usual case), borrowed; `None` when it
    /// would have to be decoded (use [`JsonStr::chars`]).
    pub fn as_str(&self) -> Option<&'a str> {
        (!self.escaped).then(|| self.raw())
    }

    /// The decoded characters.
    pub fn chars(&self) -> impl Iterator<Item = char> + 'a {
        Unescape { rest: self.raw().chars() }
    }

    /// Whether the decoded string is `other`. Does not allocate.
    pub fn eq_str(&self, other: &str) -> bool {
        match self.as_str() {
            Some(s) => s == other,
            None => self.chars().eq(other.chars()),
        }
    }

    /// Appends the decoded UTF-8 bytes to `out`, but at most `limit` of them; returns `false`
    /// (and leaves `out` with the bytes written so far) if the string is longer.
    pub fn decode_into(&self, out: &mut Vec<u8>, limit: usize) -> bool {
        if let Some(s) = self.as_str() {
            if s.len() > limit {
                return false;
            }
            out.extend_from_slice(s.as_bytes());
            return true;
        }
        let start = out.len();
        let mut utf8 = [0u8; 4];
        for c in self.chars() {
            let bytes = c.encode_utf8(&mut utf8).as_bytes();
            if out.len() - start + bytes.len() > limit {
                return false;
            }
            out.extend_from_slice(bytes);
        }
        true
    }

    fn cmp_decoded(&self, other: &Self) -> Ordering {
        match (self.as_str(), other.as_str()) {
            (Some(a), Some(b)) => a.cmp(b),
            _ => self.chars().cmp(other.chars()),
        }
    }
}

/// Decodes the escapes of a string that [`parse`] has validated.
struct Unescape<'a> {
    rest: core::str::Chars<'a>,
}

impl Unescape<'_> {
    fn hex4(&mut self) -> Option<u32> {
        let mut value = 0;
        for _ in 0..4 {
            value = value * 16 + self.rest.next()?.to_digit(16)?;
        }
        Some(value)
    }
}

impl Iterator for Unescape<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let c = self.rest.next()?;
        if c != '\\' {
            return Some(c);
        }
        Some(match self.rest.next()? {
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let first = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&first) {
                    // Validated: a low surrogate escape follows.
                    self.rest.nth(1)?;
                    let low = self.hex4()?;
                    0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    first
                };
                char::from_u32(code)?
            }
            other => other, // `"`, `\`, `/`
        })
    }
}

/// A JSON number, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Number<'a> {
    raw: &'a str,
}

impl<'a> Number<'a> {
    /// The number's text.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// The number rounded down to an integer, saturating at the ends of `i64`: what a
    /// NumericDate (RFC 7519 §2, seconds since the epoch, maybe fractional) needs.
    pub fn as_seconds(&self) -> i64 {
        let text = self.raw.as_bytes();
        // Nearly every date is a plain non-negative integer: no 128-bit arithmetic for those.
        if text.len() <= 18 && text.iter().all(u8::is_ascii_digit) {
            return text.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
        }
        let (negative, text) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, text),
        };
        let split = |t: &'a [u8], stop: &[u8]| {
            let end = t.iter().position(|b| stop.contains(b)).unwrap_or(t.len());
            (&t[..end], &t[end..])
        };
        let (int, rest) = split(text, b".eE");
        let (frac, rest) = match rest.split_first() {
            Some((b'.', rest)) => split(rest, b"eE"),
            _ => (&[][..], rest),
        };
        // The exponent, clamped: past ±400 the result saturates or is zero anyway.
        let exponent: i32 = match rest.split_first() {
            Some((_, exp)) => {
                let (sign, digits) = match exp.split_first() {
                    Some((b'-', d)) => (-1, d),
                    Some((b'+', d)) => (1, d),
                    _ => (1, exp),
                };
                let magnitude =
                    digits.iter().fold(0i32, |acc, d| (acc * 10 + i32::from(d - b'0')).min(1000));
                sign * magnitude
            }
            None => 0,
        };
        // value = mantissa × 10^scale with the first 18 significant digits (exact below
        // 10^18 s, thirty billion years; past that, dates saturate anyway). 64-bit only.
        let mut mantissa: u64 = 0;
        let mut scale = exponent;
        let mut digits = 0;
        let mut dropped = false;
        for &d in int.iter().chain(frac) {
            if digits < 18 {
                mantissa = mantissa * 10 + u64::from(d - b'0');
                if mantissa != 0 {
                    digits += 1;
                }
            } else {
                scale += 1;
                dropped |= d != b'0';
            }
        }
        scale -= frac.len().min(1000) as i32;
        let (magnitude, inexact) = if scale >= 0 {
            let scaled = (0..scale.min(20)).fold(mantissa, |v, _| v.saturating_mul(10));
            (scaled, false)
        } else {
            match 10u64.checked_pow((-scale) as u32) {
                Some(divisor) => (mantissa / divisor, !mantissa.is_multiple_of(divisor) || dropped),
                None => (0, mantissa != 0 || dropped),
            }
        };
        let Ok(magnitude) = i64::try_from(magnitude) else {
            return if negative { i64::MIN } else { i64::MAX };
        };
        match (negative, inexact) {
            (false, _) => magnitude,
            // Rounding down a negative number with a fraction goes one further from zero.
            (true, true) => magnitude.saturating_neg().saturating_sub(1),
            (true, false) => magnitude.saturating_neg(),
        }
    }
}

/// A JSON array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Array<'a> {
    raw: &'a str,
}

impl<'a> Array<'a> {
    /// The elements, in order.
    pub fn iter(self) -> impl Iterator<Item = Value<'a>> + 'a {
        items(self.raw, b']', Cursor::value_unchecked)
    }
}

/// The items of a validated array or object's text, each read by `item` after the separator.
/// Any surprise (there can be none after `parse`) just ends the iteration.
fn items<'a, T: 'a>(
    raw: &'a str,
    close: u8,
    mut item: impl FnMut(&mut Cursor<'a>) -> Result<T, JsonError> + 'a,
) -> impl Iterator<Item = T> + 'a {
    let mut cursor = Cursor::new(raw.as_bytes(), raw);
    cursor.pos = 1;
    let mut first = true;
    core::iter::from_fn(move || {
        cursor.skip_ws();
        if cursor.peek()? == close {
            return None;
        }
        if !first {
            cursor.expect(b',').ok()?;
            cursor.skip_ws();
        }
        first = false;
        item(&mut cursor).ok()
    })
}

/// A JSON object, validated: no key appears twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object<'a> {
    raw: &'a str,
}

impl<'a> Object<'a> {
    /// The members, in document order.
    pub fn iter(self) -> impl Iterator<Item = (JsonStr<'a>, Value<'a>)> + 'a {
        items(self.raw, b'}', |cursor| {
            let key = cursor.string_unchecked()?;
            cursor.skip_ws();
            cursor.expect(b':')?;
            cursor.skip_ws();
            Ok((key, cursor.value_unchecked()?))
        })
    }

    /// The value of member `name`. Keys are unique, so there is at most one.
    pub fn get(&self, name: &str) -> Option<Value<'a>> {
        self.iter().find(|(key, _)| key.eq_str(name)).map(|(_, value)| value)
    }

    /// The object's JSON text.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// An object whose text [`parse`] accepted before (the caller kept it): not checked again.
    pub(crate) fn validated(raw: &'a str) -> Self {
        Self { raw }
    }
}

/// Parses and validates a whole document.
pub fn parse(bytes: &[u8]) -> Result<Value<'_>, JsonError> {
    parse_str(core::str::from_utf8(bytes).map_err(|_| JsonError::Syntax)?)
}

/// Parses and validates a document that must be an object, calling `visit` with each of its
/// members as they are read. A visitor's error stops the parse and is returned; a document
/// that turns out invalid after some members were visited is still an error.
pub fn parse_object<'a, E: From<JsonError>>(
    text: &'a str,
    visit: &mut dyn FnMut(JsonStr<'a>, Value<'a>) -> Result<(), E>,
) -> Result<Object<'a>, E> {
    let mut cursor = Cursor::new(text.as_bytes(), text);
    cursor.skip_ws();
    if cursor.peek() != Some(b'{') {
        return Err(JsonError::Syntax.into());
    }
    let object = cursor.object_with(1, visit)?;
    cursor.skip_ws();
    if cursor.pos != text.len() {
        return Err(JsonError::Syntax.into());
    }
    Ok(object)
}

/// [`parse`] for text already known to be UTF-8.
pub fn parse_str(text: &str) -> Result<Value<'_>, JsonError> {
    let bytes = text.as_bytes();
    let mut cursor = Cursor::new(bytes, text);
    cursor.skip_ws();
    let value = cursor.value(0)?;
    cursor.skip_ws();
    if cursor.pos != bytes.len() {
        return Err(JsonError::Syntax);
    }
    Ok(value)
}

/// The keys of one object, for the duplicate check: on the stack while there are few (a JOSE
/// header or a claims set), in the arena beyond.
#[derive(Default)]
struct Keys<'a> {
    small: [Option<JsonStr<'a>>; SMALL_OBJECT],
    len: usize,
    more: Vec<JsonStr<'a>>,
}

/// Objects with at most this many keys are checked for duplicates pairwise, without
/// allocating; larger ones are sorted.
const SMALL_OBJECT: usize = 12;

impl<'a> Keys<'a> {
    fn push(&mut self, key: JsonStr<'a>) {
        if self.len < SMALL_OBJECT {
            self.small[self.len] = Some(key);
        } else {
            if self.more.is_empty() {
                self.more.extend(self.small.iter().flatten().copied());
            }
            self.more.push(key);
        }
        self.len += 1;
    }

    fn has_duplicate(&mut self) -> bool {
        if self.len <= SMALL_OBJECT {
            let keys = &self.small[..self.len];
            return keys.iter().enumerate().any(|(i, a)| {
                keys[..i].iter().any(|b| match (a, b) {
                    (Some(a), Some(b)) => a.cmp_decoded(b) == Ordering::Equal,
                    _ => false,
                })
            });
        }
        heapsort(&mut self.more, |a, b| a.cmp_decoded(b) == Ordering::Less);
        self.more.windows(2).any(|pair| pair[0].cmp_decoded(&pair[1]) == Ordering::Equal)
    }
}

/// The bytes that end a run of plain string characters: `"`, `\` and the control characters.
/// One table load per byte instead of three comparisons.
static SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Sorts `v` by `less` in O(n log n) with no allocation. Here instead of `sort_unstable_by`,
/// which is several KiB of Wasm for a path that only objects of more than
/// [`SMALL_OBJECT`] keys take.
fn heapsort<T>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let sift_down = |v: &mut [T], mut node: usize| loop {
        let mut child = 2 * node + 1;
        if child >= v.len() {
            break;
        }
        if child + 1 < v.len() && less(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !less(&v[node], &v[child]) {
            break;
        }
        v.swap(node, child);
        node = child;
    };
    for node in (0..v.len() / 2).rev() {
        sift_down(v, node);
    }
    for end in (1..v.len()).rev() {
        v.swap(0, end);
        sift_down(&mut v[..end], 0);
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8], text: &'a str) -> Self {
        Self { bytes, text, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn bump(&mut self) -> Result<u8, JsonError> {
        let b = self.peek().ok_or(JsonError::Syntax)?;
        self.pos += 1;
        Ok(b)
    }

    fn expect(&mut self, want: u8) -> Result<(), JsonError> {
        if self.bump()? == want { Ok(()) } else { Err(JsonError::Syntax) }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn slice(&self, start: usize) -> &'a str {
        // Every position the cursor stops at is on an ASCII byte, so on a char boundary.
        self.text.get(start..self.pos).unwrap_or("")
    }

    /// A value, validating everything (the first pass).
    fn value(&mut self, depth: usize) -> Result<Value<'a>, JsonError> {
        match self.peek().ok_or(JsonError::Syntax)? {
            b'{' => self.object(depth + 1).map(Value::Object),
            b'[' => self.array(depth + 1).map(Value::Array),
            b'"' => self.string().map(Value::String),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            b'-' | b'0'..=b'9' => self.number().map(Value::Number),
            _ => Err(JsonError::Syntax),
        }
    }

    /// A value in text [`parse`] has already validated: containers are skipped, not checked.
    fn value_unchecked(&mut self) -> Result<Value<'a>, JsonError> {
        let start = self.pos;
        match self.peek().ok_or(JsonError::Syntax)? {
            open @ (b'{' | b'[') => {
                let mut depth = 0usize;
                loop {
                    match self.peek().ok_or(JsonError::Syntax)? {
                        b'"' => {
                            self.string_unchecked()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                    self.pos += 1;
                    if depth == 0 {
                        break;
                    }
                }
                let raw = self.slice(start);
                Ok(if open == b'{' {
                    Value::Object(Object { raw })
                } else {
                    Value::Array(Array { raw })
                })
            }
            b'"' => self.string_unchecked().map(Value::String),
            _ => self.value(0),
        }
    }

    /// A string in text [`parse`] has validated: only the end is looked for.
    fn string_unchecked(&mut self) -> Result<JsonStr<'a>, JsonError> {
        self.scan_string(false)
    }

    fn literal(&mut self, word: &str, value: Value<'a>) -> Result<Value<'a>, JsonError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(JsonError::Syntax)
        }
    }

    fn object(&mut self, depth: usize) -> Result<Object<'a>, JsonError> {
        self.object_with(depth, &mut |_, _| Ok(()))
    }

    /// An object, calling `visit` with each member as it is read (the first pass can then
    /// do what a second would).
    fn object_with<E: From<JsonError>>(
        &mut self,
        depth: usize,
        visit: &mut dyn FnMut(JsonStr<'a>, Value<'a>) -> Result<(), E>,
    ) -> Result<Object<'a>, E> {
        if depth > MAX_DEPTH {
            return Err(JsonError::TooDeep.into());
        }
        let start = self.pos;
        self.expect(b'{')?;
        self.skip_ws();
        let mut keys = Keys::default();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Object { raw: self.slice(start) });
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(JsonError::Syntax.into());
            }
            let key = self.string()?;
            keys.push(key);
            self.skip_ws();
            self.expect(b':')?;
            self.skip_ws();
            let value = self.value(depth)?;
            visit(key, value)?;
            self.skip_ws();
            match self.bump()? {
                b',' => continue,
                b'}' => break,
                _ => return Err(JsonError::Syntax.into()),
            }
        }
        if keys.has_duplicate() {
            return Err(JsonError::DuplicateKey.into());
        }
        Ok(Object { raw: self.slice(start) })
    }

    fn array(&mut self, depth: usize) -> Result<Array<'a>, JsonError> {
        if depth > MAX_DEPTH {
            return Err(JsonError::TooDeep);
        }
        let start = self.pos;
        self.expect(b'[')?;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Array { raw: self.slice(start) });
        }
        loop {
            self.skip_ws();
            self.value(depth)?;
            self.skip_ws();
            match self.bump()? {
                b',' => continue,
                b']' => break,
                _ => return Err(JsonError::Syntax),
            }
        }
        Ok(Array { raw: self.slice(start) })
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let mut value = 0;
        for _ in 0..4 {
            let digit = (self.bump()? as char).to_digit(16).ok_or(JsonError::Syntax)?;
            value = value * 16 + digit;
        }
        Ok(value)
    }

    fn string(&mut self) -> Result<JsonStr<'a>, JsonError> {
        self.scan_string(true)
    }

    /// A string, its escapes (and the absence of control characters) checked when `checked`.
    fn scan_string(&mut self, checked: bool) -> Result<JsonStr<'a>, JsonError> {
        let start = self.pos;
        self.expect(b'"')?;
        let mut escaped = false;
        loop {
            // Hot path: plain characters, up to the next quote, backslash or control byte.
            let rest = &self.bytes[self.pos..];
            self.pos +=
                rest.iter().position(|&b| SPECIAL[usize::from(b)]).ok_or(JsonError::Syntax)?;
            match self.bump()? {
                b'"' => break,
                b'\\' if !checked => {
                    escaped = true;
                    self.bump()?; // whatever follows a backslash is not the end
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                _ if !checked => {}
                _ => return Err(JsonError::Syntax), // a control character
            }
        }
        Ok(JsonStr { quoted: self.slice(start), escaped })
    }

    /// The rest of an escape sequence, after its backslash.
    fn escape(&mut self) -> Result<(), JsonError> {
        match self.bump()? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(()),
            b'u' => {
                let code = self.hex4()?;
                if (0xDC00..0xE000).contains(&code) {
                    return Err(JsonError::Syntax); // a lone low surrogate
                }
                if (0xD800..0xDC00).contains(&code) {
                    self.expect(b'\\')?;
                    self.expect(b'u')?;
                    if !(0xDC00..0xE000).contains(&self.hex4()?) {
                        return Err(JsonError::Syntax);
                    }
                }
                Ok(())
            }
            _ => Err(JsonError::Syntax),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Number<'a>, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(JsonError::Syntax),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(JsonError::Syntax);
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(JsonError::Syntax);
            }
        }
        Ok(Number { raw: self.slice(start) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::string::String;
    use std::vec;

    fn object(text: &str) -> Object<'_> {
        parse(text.as_bytes()).unwrap().as_object().unwrap()
    }

    #[test]
    fn reads_members_in_place() {
        let o = object(
            "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}",
        );
        assert!(o.get("iss").unwrap().as_json_str().unwrap().eq_str("joe"));
        let Some(Value::Number(exp)) = o.get("exp") else { panic!() };
        assert_eq!(exp.as_seconds(), 1300819380);
        assert_eq!(o.get("http://example.com/is_root"), Some(Value::Bool(true)));
        assert_eq!(o.get("missing"), None);
        let names: vec::Vec<&str> = o.iter().map(|(k, _)| k.raw()).collect();
        assert_eq!(names, ["iss", "exp", "http://example.com/is_root"]);
    }

    #[test]
    fn parse_object_visits_top_level_members_once() {
        let mut seen = vec::Vec::new();
        let text = r#" {"a":1,"b":{"c":2},"d":"x"} "#;
        let o = parse_object::<JsonError>(text, &mut |k, v| {
            seen.push((k.raw(), v.raw()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [("a", "1"), ("b", r#"{"c":2}"#), ("d", "\"x\"")]);
        assert_eq!(o.raw(), r#"{"a":1,"b":{"c":2},"d":"x"}"#);
        for bad in ["[1]", "{} x", r#"{"a":1,"a":2}"#, "{"] {
            assert!(parse_object::<JsonError>(bad, &mut |_, _| Ok(())).is_err(), "{bad}");
        }
        let stopped = parse_object::<JsonError>(r#"{"a":1,"b":2}"#, &mut |k, _| {
            if k.raw() == "b" { Err(JsonError::Syntax) } else { Ok(()) }
        });
        assert_eq!(stopped, Err(JsonError::Syntax));
    }

    #[test]
    fn nested_values_are_skipped_and_iterated() {
        let o = object(r#"{"a":{"b":[1,{"c":"}"}]},"d":[ "x" , "y" ],"e":{}}"#);
        assert_eq!(o.get("a").unwrap().raw(), r#"{"b":[1,{"c":"}"}]}"#);
        let Some(Value::Array(d)) = o.get("d") else { panic!() };
        let items: vec::Vec<&str> = d.iter().map(|v| v.as_json_str().unwrap().raw()).collect();
        assert_eq!(items, ["x", "y"]);
        assert_eq!(o.get("e").unwrap().as_object().unwrap().iter().count(), 0);
    }

    #[test]
    fn escapes_decode() {
        let o = object(r#"{"k":"a\"b\\c\/d\u00e9\ud83d\ude00\n"}"#);
        let s = o.get("k").unwrap().as_json_str().unwrap();
        assert_eq!(s.as_str(), None, "escaped strings are not handed out raw");
        assert_eq!(s.chars().collect::<String>(), "a\"b\\c/dé😀\n");
        assert!(s.eq_str("a\"b\\c/dé😀\n"));
        let mut out = vec::Vec::new();
        assert!(s.decode_into(&mut out, 64));
        assert_eq!(out, "a\"b\\c/dé😀\n".as_bytes());
        out.clear();
        assert!(!s.decode_into(&mut out, 5), "over the limit");
        // A key written with escapes is found by its decoded name.
        assert!(object(r#"{"\u0061lg":"x"}"#).get("alg").is_some());
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth_even_when_escaped() {
        for text in [
            r#"{"alg":"HS256","alg":"none"}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{"alg":"HS256","\u0061lg":"none"}"#,
            r#"{"x":{"k":1,"k":2}}"#,
            r#"{"x":[{"k":1,"k":2}]}"#,
        ] {
            assert_eq!(parse(text.as_bytes()), Err(JsonError::DuplicateKey), "{text}");
        }
        assert!(parse(br#"{"a":{"k":1},"b":{"k":2}}"#).is_ok(), "same key in two objects");
        // Past the small-object size the keys are sorted instead: the same answers.
        let object = |keys: &[usize]| {
            let members: vec::Vec<String> =
                keys.iter().map(|k| std::format!("\"k{k}\":{k}")).collect();
            std::format!("{{{}}}", members.join(","))
        };
        let distinct: vec::Vec<usize> = (0..3 * SMALL_OBJECT).collect();
        assert!(parse(object(&distinct).as_bytes()).is_ok());
        for (a, b) in
            [(3, 3 * SMALL_OBJECT - 1), (0, 1), (SMALL_OBJECT - 1, SMALL_OBJECT), (30, 31)]
        {
            let mut keys = distinct.clone();
            keys[b] = keys[a];
            assert_eq!(parse(object(&keys).as_bytes()), Err(JsonError::DuplicateKey), "{a} = {b}");
        }
    }

    #[test]
    fn malformed_documents_are_refused() {
        for text in [
            "",
            "{",
            "}",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "[1,]",
            "{a:1}",
            "{'a':1}",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "NaN",
            "tru",
            "nulls",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"a\u{1}\"",
            "{} {}",
            "[1 2]",
            "\"unterminated",
        ] {
            assert_eq!(parse(text.as_bytes()), Err(JsonError::Syntax), "{text:?}");
        }
        assert_eq!(parse(b"\"\xff\""), Err(JsonError::Syntax), "bad UTF-8");
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(deep.as_bytes()), Err(JsonError::TooDeep));
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn numeric_dates_round_down_and_saturate() {
        let seconds = |text: &str| match parse(text.as_bytes()).unwrap() {
            Value::Number(n) => n.as_seconds(),
            other => panic!("{other:?}"),
        };
        assert_eq!(seconds("0"), 0);
        assert_eq!(seconds("1300819380"), 1300819380);
        assert_eq!(seconds("1300819380.999"), 1300819380);
        assert_eq!(seconds("-1.5"), -2);
        assert_eq!(seconds("-2"), -2);
        assert_eq!(seconds("1.3e9"), 1_300_000_000);
        assert_eq!(seconds("13E-1"), 1);
        assert_eq!(seconds("1e400"), i64::MAX);
        assert_eq!(seconds("-1e400"), i64::MIN);
        assert_eq!(seconds("1e-400"), 0);
        assert_eq!(seconds("99999999999999999999999999999999999999999999"), i64::MAX);
        assert_eq!(seconds("0.000000000000000000000000000000000000000000001e45"), 1);
    }

    /// JSON text for a `serde_json::Value`, with no duplicate keys (a map cannot hold them).
    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(serde_json::Value::from),
            (-1e12f64..1e12).prop_map(serde_json::Value::from),
            ".{0,8}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                proptest::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Compares a parsed value with serde_json's reading of the same text.
    fn same(ours: Value<'_>, theirs: &serde_json::Value) -> bool {
        match (ours, theirs) {
            (Value::Null, serde_json::Value::Null) => true,
            (Value::Bool(a), serde_json::Value::Bool(b)) => a == *b,
            (Value::Number(n), serde_json::Value::Number(m)) => {
                n.raw().parse::<f64>().ok() == m.as_f64()
            }
            (Value::String(s), serde_json::Value::String(t)) => s.eq_str(t),
            (Value::Array(a), serde_json::Value::Array(b)) => {
                a.iter().count() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
            }
            (Value::Object(o), serde_json::Value::Object(m)) => {
                o.iter().count() == m.len()
                    && m.iter().all(|(k, v)| o.get(k).is_some_and(|x| same(x, v)))
            }
            _ => false,
        }
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json_on_documents(value in arb_json(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            let ours = parse(text.as_bytes());
            prop_assert!(ours.is_ok(), "{text}: {ours:?}");
            prop_assert!(same(ours.unwrap(), &value), "{text}");
        }

        #[test]
        fn accepts_exactly_what_serde_json_accepts(text in "[\\[\\]{}\",:0-9a-z\\\\ .eE+-]{0,24}") {
            let ours = parse(text.as_bytes());
            let theirs = serde_json::from_str::<serde_json::Value>(&text);
            match ours {
                Ok(_) => prop_assert!(theirs.is_ok(), "we accept {text:?}, serde_json does not"),
                Err(JsonError::Syntax) => prop_assert!(theirs.is_err(), "we refuse {text:?}"),
                // serde_json keeps the last duplicate; depth cannot be reached in 24 bytes.
                Err(JsonError::DuplicateKey) => prop_assert!(theirs.is_ok()),
                Err(JsonError::TooDeep) => prop_assert!(false, "{text:?}"),
            }
        }

        #[test]
        fn heapsort_sorts(mut v in proptest::collection::vec(any::<u16>(), 0..200)) {
            let mut expected = v.clone();
            expected.sort();
            heapsort(&mut v, |a, b| a < b);
            prop_assert_eq!(v, expected);
        }

        #[test]
        fn numeric_dates_match_a_float_floor(int in 0u64..10_000_000_000, frac in "[0-9]{0,6}", exp in -8i32..8, negative in any::<bool>()) {
            let text = std::format!("{}{int}{}{}e{exp}", if negative { "-" } else { "" }, if frac.is_empty() { "" } else { "." }, frac);
            let Value::Number(n) = parse(text.as_bytes()).unwrap() else { panic!() };
            let float: f64 = text.parse().unwrap();
            // f64 is exact to about 15 digits; compare where it is.
            if float.abs() < 1e15 {
                prop_assert_eq!(n.as_seconds(), float.floor() as i64, "{}", text);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(Value::Object(o)) = parse(&bytes) {
                for (k, v) in o.iter() {
                    let _ = (k.chars().count(), v.raw());
                }
            }
        }
    }
}
