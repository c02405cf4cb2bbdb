//! The key-value hostcalls' limits and their list format.
//!
//! A worker reaches a KV namespace by name, and only the namespaces its configuration grants.
//! Keys are bytes (never paths) of at most [`MAX_KEY_LEN`]; values are bytes too, capped per
//! worker. Batches go in and out as blocks:
//!
//! * `kv_put_batch` takes an entry block, `[key_len: u32][value_len: u32][key][value]` per
//!   entry (what [`crate::encode_entries`] writes);
//! * `kv_get_batch` takes a list block of keys and answers with a list block of values in the
//!   same order, a missing key as [`MISSING`];
//! * `kv_list` answers with a list block of keys.
//!
//! A list block is items `[len: u32][bytes]` end to end; an item whose `len` is [`MISSING`] has
//! no bytes.

use crate::DecodeError;
use crate::codec::Reader;

/// The longest key, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// The most keys one `kv_list` call answers with.
pub const MAX_LIST: u32 = 1000;

/// A list item's length when the item is absent (a missing key in a `kv_get_batch` answer).
pub const MISSING: u32 = u32::MAX;

/// `ttl_ms` for "keep until deleted".
pub const NO_TTL: i64 = 0;

/// Appends one list item; `None` is a missing one.
pub fn push_item(out: &mut alloc::vec::Vec<u8>, item: Option<&[u8]>) {
    match item {
        Some(bytes) => {
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        None => out.extend_from_slice(&MISSING.to_le_bytes()),
    }
}

/// The encoded length of a list block of `items`.
pub fn list_len<'i>(items: impl IntoIterator<Item = Option<&'i [u8]>>) -> usize {
    items.into_iter().map(|item| 4 + item.map_or(0, <[u8]>::len)).sum()
}

/// A validated list block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListBlock<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> ListBlock<'a> {
    /// Checks every item of `bytes` once, so that iterating cannot fail.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let mut count = 0;
        while !r.is_empty() {
            match r.u32()? {
                MISSING => {}
                len => {
                    r.bytes(len)?;
                }
            }
            count += 1;
        }
        Ok(Self { bytes, count })
    }

    /// How many items.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The items in order; `None` for a missing one.
    pub fn iter(self) -> impl Iterator<Item = Option<&'a [u8]>> + 'a {
        let mut r = Reader::new(self.bytes);
        core::iter::from_fn(move || {
            if r.is_empty() {
                return None;
            }
            // Validated in `parse`.
            match r.u32().ok()? {
                MISSING => Some(None),
                len => Some(Some(r.bytes(len).ok()?)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn list_blocks_round_trip_and_refuse_truncation() {
        let items = [Some(&b"one"[..]), None, Some(b""), Some(b"four")];
        let mut block = Vec::new();
        for item in items {
            push_item(&mut block, item);
        }
        assert_eq!(block.len(), list_len(items));
        let parsed = ListBlock::parse(&block).unwrap();
        assert_eq!(parsed.len(), 4);
        assert_eq!(parsed.iter().collect::<Vec<_>>(), items);
        assert!(ListBlock::parse(&[]).unwrap().is_empty());
        let boundaries = [7, 11, 15];
        for cut in 1..block.len() {
            let result = ListBlock::parse(&block[..cut]);
            assert_eq!(result.is_ok(), boundaries.contains(&cut), "cut at {cut}");
        }
    }
}
