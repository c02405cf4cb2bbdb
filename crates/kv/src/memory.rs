//! The in-memory backend: sharded swiss tables.
//!
//! `dashmap` splits the map into shards (a few per core), each a `hashbrown` swiss table under
//! its own reader-writer lock: a read takes one uncontended shared lock and clones a `Bytes`
//! (a reference count), so readers on different cores do not wait on each other, and a writer
//! blocks only its shard. Keys are hashed with the standard library's keyed SipHash, since they
//! come from clients (no hash flooding).
//!
//! Expired entries are invisible at once and purged by [`MemoryStore::purge_expired`], which
//! the gateway runs periodically. The namespace holds at most `capacity` bytes of keys and
//! values; a write past it fails with [`KvError::Full`] and changes nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry as MapEntry;

use crate::{Backend, KvError, add_to_counter, listed};

#[derive(Debug, Clone)]
struct Entry {
    value: Bytes,
    expires: Option<Instant>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|at| at > now)
    }
}

/// A namespace in this process's memory.
#[derive(Debug)]
pub struct MemoryStore {
    map: DashMap<Box<[u8]>, Entry>,
    /// Bytes of keys and values stored.
    used: AtomicU64,
    capacity: u64,
}

impl MemoryStore {
    /// An empty namespace that holds at most `capacity` bytes of keys and values.
    pub fn new(capacity: u64) -> Self {
        Self { map: DashMap::new(), used: AtomicU64::new(0), capacity }
    }

    /// Bytes of keys and values stored, expired entries not yet purged included.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// [`Backend::get`], synchronously: the memory store never waits.
    pub fn get_now(&self, key: &[u8]) -> Option<Bytes> {
        self.read(key, &mut None)
    }

    /// Removes expired entries; returns how many.
    pub fn purge_expired(&self) -> usize {
        let now = Instant::now();
        let mut purged = 0;
        self.map.retain(|key, entry| {
            let live = entry.live(now);
            if !live {
                self.used.fetch_sub(size(key, &entry.value), Ordering::Relaxed);
                purged += 1;
            }
            live
        });
        purged
    }

    /// The value, if live. The clock is read only for an entry that can expire.
    fn read(&self, key: &[u8], now: &mut Option<Instant>) -> Option<Bytes> {
        let entry = self.map.get(key)?;
        match entry.expires {
            None => Some(entry.value.clone()),
            Some(at) => (at > *now.get_or_insert_with(Instant::now)).then(|| entry.value.clone()),
        }
    }

    /// Reserves `grow` more bytes, or fails without reserving any.
    fn reserve(&self, grow: u64) -> Result<(), KvError> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(grow).filter(|&total| total <= self.capacity)
            })
            .map(drop)
            .map_err(|_| KvError::Full { capacity: self.capacity })
    }

    /// Accounts for an entry going from `old` to `new` bytes, or fails without changing
    /// anything.
    fn resize(&self, old: u64, new: u64) -> Result<(), KvError> {
        if new > old {
            self.reserve(new - old)
        } else {
            self.used.fetch_sub(old - new, Ordering::Relaxed);
            Ok(())
        }
    }

    fn store(&self, key: &[u8], value: Bytes, expires: Option<Instant>) -> Result<(), KvError> {
        let new = size(key, &value);
        match self.map.entry(key.into()) {
            MapEntry::Occupied(mut slot) => {
                self.resize(size(key, &slot.get().value), new)?;
                slot.insert(Entry { value, expires });
            }
            MapEntry::Vacant(slot) => {
                self.reserve(new)?;
                slot.insert(Entry { value, expires });
            }
        }
        Ok(())
    }
}

fn size(key: &[u8], value: &[u8]) -> u64 {
    (key.len() + value.len()) as u64
}

fn expiry(ttl: Option<Duration>, now: Instant) -> Option<Instant> {
    ttl.and_then(|ttl| now.checked_add(ttl))
}

impl Backend for MemoryStore {
    async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        Ok(self.get_now(key))
    }

    async fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, KvError> {
        let mut now = None;
        Ok(keys.iter().map(|key| self.read(key, &mut now)).collect())
    }

    async fn put(&self, key: &[u8], value: &[u8], ttl: Option<Duration>) -> Result<(), KvError> {
        self.store(key, Bytes::copy_from_slice(value), expiry(ttl, Instant::now()))
    }

    async fn put_many(
        &self,
        entries: &[(&[u8], &[u8])],
        ttl: Option<Duration>,
    ) -> Result<(), KvError> {
        // All or none as far as capacity goes: check the whole batch first.
        let total: u64 = entries.iter().map(|(k, v)| size(k, v)).sum();
        if self.used().saturating_add(total) > self.capacity {
            return Err(KvError::Full { capacity: self.capacity });
        }
        let expires = expiry(ttl, Instant::now());
        for (key, value) in entries {
            self.store(key, Bytes::copy_from_slice(value), expires)?;
        }
        Ok(())
    }

    async fn delete(&self, key: &[u8]) -> Result<bool, KvError> {
        let now = Instant::now();
        match self.map.remove(key) {
            Some((key, entry)) => {
                self.used.fetch_sub(size(&key, &entry.value), Ordering::Relaxed);
                Ok(entry.live(now))
            }
            None => Ok(false),
        }
    }

    async fn incr(&self, key: &[u8], delta: i64, ttl: Option<Duration>) -> Result<i64, KvError> {
        let now = Instant::now();
        // The shard stays locked from the read to the write: the increment is atomic.
        match self.map.entry(key.into()) {
            MapEntry::Occupied(mut slot) => {
                let entry = slot.get();
                let live = entry.live(now);
                let sum = add_to_counter(live.then_some(&entry.value[..]), delta)?;
                let value = Bytes::from(sum.to_string());
                self.resize(size(key, &entry.value), size(key, &value))?;
                let expires = match entry.expires {
                    Some(at) if live => Some(at),
                    _ => expiry(ttl, now),
                };
                slot.insert(Entry { value, expires });
                Ok(sum)
            }
            MapEntry::Vacant(slot) => {
                let sum = add_to_counter(None, delta)?;
                let value = Bytes::from(sum.to_string());
                self.reserve(size(key, &value))?;
                slot.insert(Entry { value, expires: expiry(ttl, now) });
                Ok(sum)
            }
        }
    }

    async fn list(&self, prefix: &[u8], after: &[u8], limit: usize) -> Result<Vec<Bytes>, KvError> {
        // A hash table has no order: collect the matches, then sort. O(entries) per call.
        let now = Instant::now();
        let mut keys: Vec<Bytes> = self
            .map
            .iter()
            .filter(|e| listed(e.key(), prefix, after) && e.value().live(now))
            .map(|e| Bytes::copy_from_slice(e.key()))
            .collect();
        keys.sort_unstable();
        keys.truncate(limit);
        Ok(keys)
    }
}
