//! Key-value storage: the namespaces the gateway's configuration grants this worker.
//!
//! ```no_run
//! use edgegate_sdk::kv;
//! let sessions = kv::namespace("sessions");
//! sessions.put(b"user:7", b"{\"name\":\"ada\"}")?;
//! let value = sessions.get(b"user:7")?; // Some(bytes) or None
//! // A fixed-window rate limiter: at most 100 calls a minute per client.
//! let calls = kv::namespace("limits").incr(b"client:42", 1, Some(60_000))?;
//! if calls > 100 { /* 429 */ }
//! # Ok::<(), edgegate_sdk::HostError>(())
//! ```
//!
//! Every call returns the host's error code on failure: [`HostError::NotGranted`] for a
//! namespace the worker may not use, [`HostError::LimitExceeded`] for a key over 512 bytes, a
//! value over the worker's cap or the request's KV operations spent,
//! [`HostError::Unavailable`] or [`HostError::Timeout`] when the store (Redis) cannot answer,
//! [`HostError::NotAnInteger`] from [`Namespace::incr`]. Values are copied into the arena, which
//! lives as long as the request.

use alloc::vec::Vec;

use edgegate_abi::HostError;
use edgegate_abi::kv::{ListBlock, NO_TTL};
pub use edgegate_abi::kv::{MAX_KEY_LEN, MAX_LIST};

use crate::host::{read_answer, status};
use crate::sys::{self, KvRead};

/// The room first offered for a value: enough for most in one call.
const FIRST_READ: usize = 1024;

/// A namespace, by name. Cheap: it is only the name until a call is made.
#[derive(Debug, Clone, Copy)]
pub struct Namespace<'n> {
    name: &'n str,
}

/// The namespace `name`.
pub fn namespace(name: &str) -> Namespace<'_> {
    Namespace { name }
}

fn ttl_ms(ttl_ms: Option<u64>) -> i64 {
    ttl_ms.map_or(NO_TTL, |ms| i64::try_from(ms).unwrap_or(i64::MAX).max(1))
}

/// Items of a list block the host answered with.
#[derive(Debug, Clone)]
pub struct Items {
    block: Vec<u8>,
}

impl Items {
    fn new(block: Vec<u8>) -> Result<Self, HostError> {
        ListBlock::parse(&block).map_err(|_| HostError::InvalidArgument)?;
        Ok(Self { block })
    }

    /// The block, checked in `new`.
    fn parsed(&self) -> Option<ListBlock<'_>> {
        ListBlock::parse(&self.block).ok()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.parsed().map_or(0, |block| block.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items in order; `None` for a key [`Namespace::get_batch`] did not find.
    pub fn iter(&self) -> impl Iterator<Item = Option<&[u8]>> {
        self.parsed().into_iter().flat_map(|block| block.iter())
    }
}

impl Namespace<'_> {
    /// The value under `key`, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, HostError> {
        let ns = self.name.as_bytes();
        match read_answer(FIRST_READ, |out| sys::kv_read(KvRead::Get { ns, key }, out)) {
            Ok(value) => Ok(Some(value)),
            Err(HostError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads the value under `key` into `buf`, allocating nothing: `Some(n)` is its length,
    /// and the value is in `buf[..n]` when `n <= buf.len()`. A longer value is not written; the
    /// host keeps it, so a `get_into` with a buffer of `n` bytes right after reads it without
    /// asking the store again.
    pub fn get_into(&self, key: &[u8], buf: &mut [u8]) -> Result<Option<usize>, HostError> {
        let ns = self.name.as_bytes();
        match status(sys::kv_read(KvRead::Get { ns, key }, buf)) {
            Ok(n) => Ok(Some(n as usize)),
            Err(HostError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The values under several keys, in one host call, in the order of `keys`.
    pub fn get_batch(&self, keys: &[&[u8]]) -> Result<Items, HostError> {
        let mut block =
            Vec::with_capacity(edgegate_abi::kv::list_len(keys.iter().map(|k| Some(*k))));
        for key in keys {
            edgegate_abi::kv::push_item(&mut block, Some(key));
        }
        let ns = self.name.as_bytes();
        let call = |out: &mut [u8]| sys::kv_read(KvRead::GetBatch { ns, keys: &block }, out);
        Items::new(read_answer(FIRST_READ * keys.len().max(1), call)?)
    }

    /// Stores `value` under `key` until it is deleted.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), HostError> {
        self.put_with_ttl(key, value, None)
    }

    /// Stores `value` under `key`, for `ttl_ms` milliseconds when given.
    pub fn put_with_ttl(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Option<u64>,
    ) -> Result<(), HostError> {
        status(sys::kv_write(self.name.as_bytes(), key, value, ttl_ms(ttl))).map(drop)
    }

    /// Stores every entry in one host call (in one transaction on disk and in Redis).
    pub fn put_batch(
        &self,
        entries: &[(&[u8], &[u8])],
        ttl: Option<u64>,
    ) -> Result<u32, HostError> {
        let block = edgegate_abi::encode_entries(entries.iter().copied());
        status(sys::kv_write_batch(self.name.as_bytes(), &block, ttl_ms(ttl)))
    }

    /// Removes `key`; whether it existed.
    pub fn delete(&self, key: &[u8]) -> Result<bool, HostError> {
        status(sys::kv_remove(self.name.as_bytes(), key)).map(|n| n == 1)
    }

    /// Adds `delta` to the counter under `key` (missing: 0) and returns the sum. A `ttl_ms` is
    /// set only when the key has no expiry yet: the window of a rate limiter.
    pub fn incr(&self, key: &[u8], delta: i64, ttl: Option<u64>) -> Result<i64, HostError> {
        let mut sum = 0;
        status(sys::kv_add(self.name.as_bytes(), key, delta, ttl_ms(ttl), &mut sum))?;
        Ok(sum)
    }

    /// At most `limit` keys starting with `prefix` that sort after `after` (empty: from the
    /// first), in order. For the next page, pass the last key as `after`.
    pub fn list(&self, prefix: &[u8], after: &[u8], limit: u32) -> Result<Items, HostError> {
        let ns = self.name.as_bytes();
        let call = |out: &mut [u8]| sys::kv_read(KvRead::List { ns, prefix, after, limit }, out);
        Items::new(read_answer(FIRST_READ, call)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natively_no_namespace_is_granted() {
        let ns = namespace("anything");
        assert_eq!(ns.get(b"k"), Err(HostError::NotGranted));
        assert_eq!(ns.put(b"k", b"v"), Err(HostError::NotGranted));
        assert_eq!(ns.incr(b"k", 1, None), Err(HostError::NotGranted));
        assert_eq!(ns.list(b"", b"", 10).map(|i| i.len()), Err(HostError::NotGranted));
    }

    #[test]
    fn ttls_are_never_zero_or_negative() {
        assert_eq!(ttl_ms(None), NO_TTL);
        assert_eq!(ttl_ms(Some(0)), 1, "0 would mean no TTL");
        assert_eq!(ttl_ms(Some(u64::MAX)), i64::MAX);
    }
}
