//! The little-endian reading and writing both buffers share, and the header block format.
//!
//! A header block is `count` entries laid end to end, each
//! `[name_len: u32][value_len: u32][name][value]`. Decoding checks every entry once, up front,
//! so iterating a validated block cannot fail.

use core::fmt;

/// Why a buffer could not be decoded.
///
/// The host sees this when a guest returns a malformed outcome (an ABI violation); the guest
/// sees it only if the host is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The buffer ends before a length or field it declares.
    Truncated,
    /// The buffer has bytes after its last field.
    TrailingBytes,
    /// A field that must be UTF-8 is not.
    NotUtf8,
    /// The outcome kind is not one this ABI version defines.
    UnknownKind(u32),
    /// The request layout version is not this ABI version.
    WrongVersion(u32),
    /// A field holds a value outside its range (a status code, an edit op).
    BadValue,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("buffer ends before a field it declares"),
            Self::TrailingBytes => f.write_str("bytes after the last field"),
            Self::NotUtf8 => f.write_str("a text field is not UTF-8"),
            Self::UnknownKind(k) => write!(f, "unknown outcome kind {k}"),
            Self::WrongVersion(v) => write!(f, "request layout version {v}, expected 1"),
            Self::BadValue => f.write_str("a field is out of range"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// A bounds-checked cursor over a byte buffer. Never panics.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let (head, rest) = self.buf.split_first_chunk::<4>().ok_or(DecodeError::Truncated)?;
        self.buf = rest;
        Ok(u32::from_le_bytes(*head))
    }

    pub(crate) fn bytes(&mut self, len: u32) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
        if len > self.buf.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(head)
    }

    /// One `[name_len][value_len][name][value]` entry, as header blocks and edit blocks use.
    pub(crate) fn entry(&mut self) -> Result<(&'a [u8], &'a [u8]), DecodeError> {
        let name_len = self.u32()?;
        let value_len = self.u32()?;
        Ok((self.bytes(name_len)?, self.bytes(value_len)?))
    }

    pub(crate) fn str(&mut self, len: u32) -> Result<&'a str, DecodeError> {
        core::str::from_utf8(self.bytes(len)?).map_err(|_| DecodeError::NotUtf8)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() { Ok(()) } else { Err(DecodeError::TrailingBytes) }
    }
}

/// A bounds-checked writer into a byte slice. Never panics.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

/// The output slice is shorter or longer than the encoded data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthMismatch;

impl fmt::Display for LengthMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("output buffer length does not match the encoded length")
    }
}

impl core::error::Error for LengthMismatch {}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> Result<(), LengthMismatch> {
        let end = self.pos.checked_add(bytes.len()).ok_or(LengthMismatch)?;
        self.buf.get_mut(self.pos..end).ok_or(LengthMismatch)?.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }

    pub(crate) fn u32(&mut self, value: u32) -> Result<(), LengthMismatch> {
        self.bytes(&value.to_le_bytes())
    }

    pub(crate) fn finish(self) -> Result<(), LengthMismatch> {
        if self.pos == self.buf.len() { Ok(()) } else { Err(LengthMismatch) }
    }
}

/// The encoded size of one header entry, or `None` if a length does not fit in a `u32`.
pub(crate) fn header_entry_len(name: &[u8], value: &[u8]) -> Option<u32> {
    let name = u32::try_from(name.len()).ok()?;
    let value = u32::try_from(value.len()).ok()?;
    8u32.checked_add(name)?.checked_add(value)
}

pub(crate) fn write_header(
    w: &mut Writer<'_>,
    name: &[u8],
    value: &[u8],
) -> Result<(), LengthMismatch> {
    // Lengths were checked to fit in a u32 when the total length was computed.
    w.u32(name.len() as u32)?;
    w.u32(value.len() as u32)?;
    w.bytes(name)?;
    w.bytes(value)
}

/// Encodes `(name, value)` pairs as a block [`HeaderBlock::parse_entries`] reads back.
pub fn encode_entries<'e>(
    entries: impl IntoIterator<Item = (&'e [u8], &'e [u8])>,
) -> alloc::vec::Vec<u8> {
    let mut out = alloc::vec::Vec::new();
    for (name, value) in entries {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(value);
    }
    out
}

/// A validated block of `(name, value)` pairs. Names are compared case-insensitively by
/// [`HeaderBlock::get`]; the host always sends them in lower case.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HeaderBlock<'a> {
    bytes: &'a [u8],
    count: u32,
}

impl<'a> HeaderBlock<'a> {
    /// Checks that `bytes` holds exactly `count` well-formed entries.
    pub(crate) fn parse(bytes: &'a [u8], count: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        for _ in 0..count {
            r.entry()?;
        }
        r.finish()?;
        Ok(Self { bytes, count })
    }

    /// Checks that `bytes` is a whole number of well-formed entries, however many.
    pub fn parse_entries(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let mut count = 0u32;
        while !r.buf.is_empty() {
            r.entry()?;
            count = count.checked_add(1).ok_or(DecodeError::BadValue)?;
        }
        Ok(Self { bytes, count })
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entries in order.
    pub fn iter(&self) -> HeaderIter<'a> {
        HeaderIter { reader: Reader::new(self.bytes), left: self.count }
    }

    /// The value of the first entry named `name`, compared ASCII case-insensitively.
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.iter().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v)
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl fmt::Debug for HeaderBlock<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (name, value) in self.iter() {
            list.entry(&(BytesAsStr(name), BytesAsStr(value)));
        }
        list.finish()
    }
}

struct BytesAsStr<'a>(&'a [u8]);

impl fmt::Debug for BytesAsStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match core::str::from_utf8(self.0) {
            Ok(s) => fmt::Debug::fmt(s, f),
            Err(_) => fmt::Debug::fmt(self.0, f),
        }
    }
}

impl<'a> IntoIterator for HeaderBlock<'a> {
    type Item = (&'a [u8], &'a [u8]);
    type IntoIter = HeaderIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterates the `(name, value)` entries of a [`HeaderBlock`].
#[derive(Debug)]
pub struct HeaderIter<'a> {
    reader: Reader<'a>,
    left: u32,
}

impl fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").field("remaining", &self.buf.len()).finish()
    }
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The block was validated by `HeaderBlock::parse`, so this cannot fail; if it did,
        // iteration would simply end.
        self.reader.entry().ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}
