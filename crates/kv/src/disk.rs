//! The on-disk backend: redb, an embedded B-tree store with ACID transactions.
//!
//! Each namespace is a table in a redb file; several namespaces may share a file. Every write
//! call is one transaction committed with redb's default durability (the data is fsync'd
//! before the commit returns), so a write the guest saw acknowledged survives `kill -9` and a
//! power cut. Commits wait for the disk, so they run on tokio's blocking pool, never on a
//! runtime thread. Reads are served from redb's page cache on the calling thread: they do no
//! waiting worth a thread hop.
//!
//! A value is stored as `[expires: u64 LE, Unix milliseconds, 0 = never][bytes]`, so expiry
//! survives restarts; expired entries read as missing and are overwritten or deleted like any
//! other.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::{Backend, KvError, add_to_counter, listed};

/// An open redb file, shared by its namespaces.
#[derive(Debug, Clone)]
pub struct DiskFile(Arc<Database>);

/// A namespace in a redb file.
#[derive(Debug, Clone)]
pub struct DiskStore {
    db: Arc<Database>,
    table: Arc<str>,
}

type Table<'a> = TableDefinition<'a, &'static [u8], &'static [u8]>;

fn failed(e: impl std::fmt::Display) -> KvError {
    KvError::Unavailable(format!("redb: {e}"))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn encode(value: &[u8], ttl: Option<Duration>) -> Vec<u8> {
    let expires = ttl.map_or(0, |ttl| now_ms().saturating_add(ttl.as_millis() as u64).max(1));
    let mut stored = Vec::with_capacity(8 + value.len());
    stored.extend_from_slice(&expires.to_le_bytes());
    stored.extend_from_slice(value);
    stored
}

/// The value and its expiry (0: never), if it is live at `now`.
fn decode(stored: &[u8], now: u64) -> Option<(&[u8], u64)> {
    let (expires, value) = stored.split_first_chunk::<8>()?;
    let expires = u64::from_le_bytes(*expires);
    (expires == 0 || expires > now).then_some((value, expires))
}

impl DiskStore {
    /// Opens (or creates) the redb file at `path`. Open a file once and share it between its
    /// namespaces with [`DiskStore::namespace`]: redb locks the file.
    pub fn open(path: &Path) -> Result<DiskFile, KvError> {
        Database::create(path).map(|db| DiskFile(Arc::new(db))).map_err(failed)
    }

    /// The namespace `table` of an open file; creates its table.
    pub fn namespace(file: DiskFile, table: &str) -> Result<Self, KvError> {
        let db = file.0;
        let txn = db.begin_write().map_err(failed)?;
        txn.open_table(Table::new(table)).map_err(failed)?;
        txn.commit().map_err(failed)?;
        Ok(Self { db, table: table.into() })
    }

    fn read<T>(
        &self,
        f: impl FnOnce(
            &redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
        ) -> Result<T, redb::StorageError>,
    ) -> Result<T, KvError> {
        let txn = self.db.begin_read().map_err(failed)?;
        let table = txn.open_table(Table::new(&self.table)).map_err(failed)?;
        f(&table).map_err(failed)
    }

    /// Runs `f` in one write transaction on the blocking pool and commits it.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut redb::Table<&'static [u8], &'static [u8]>) -> Result<T, KvError>
        + Send
        + 'static,
    ) -> Result<T, KvError> {
        let store = self.clone();
        let run = move || {
            let txn = store.db.begin_write().map_err(failed)?;
            let result = {
                let mut table = txn.open_table(Table::new(&store.table)).map_err(failed)?;
                f(&mut table)?
            };
            txn.commit().map_err(failed)?;
            Ok(result)
        };
        tokio::task::spawn_blocking(run).await.map_err(failed)?
    }
}

impl Backend for DiskStore {
    async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        let now = now_ms();
        self.read(|table| {
            Ok(table.get(key)?.and_then(|v| {
                decode(v.value(), now).map(|(value, _)| Bytes::copy_from_slice(value))
            }))
        })
    }

    async fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, KvError> {
        let now = now_ms();
        self.read(|table| {
            keys.iter()
                .map(|key| {
                    Ok(table.get(*key)?.and_then(|v| {
                        decode(v.value(), now).map(|(value, _)| Bytes::copy_from_slice(value))
                    }))
                })
                .collect()
        })
    }

    async fn put(&self, key: &[u8], value: &[u8], ttl: Option<Duration>) -> Result<(), KvError> {
        self.put_many(&[(key, value)], ttl).await
    }

    async fn put_many(
        &self,
        entries: &[(&[u8], &[u8])],
        ttl: Option<Duration>,
    ) -> Result<(), KvError> {
        let owned: Vec<(Vec<u8>, Vec<u8>)> =
            entries.iter().map(|(k, v)| (k.to_vec(), encode(v, ttl))).collect();
        self.write(move |table| {
            for (key, value) in &owned {
                table.insert(&key[..], &value[..]).map_err(failed)?;
            }
            Ok(())
        })
        .await
    }

    async fn delete(&self, key: &[u8]) -> Result<bool, KvError> {
        let key = key.to_vec();
        self.write(move |table| {
            let now = now_ms();
            let removed = table.remove(&key[..]).map_err(failed)?;
            Ok(removed.is_some_and(|v| decode(v.value(), now).is_some()))
        })
        .await
    }

    async fn incr(&self, key: &[u8], delta: i64, ttl: Option<Duration>) -> Result<i64, KvError> {
        let key = key.to_vec();
        self.write(move |table| {
            let now = now_ms();
            let (sum, expires) = {
                let current = table.get(&key[..]).map_err(failed)?;
                let live = current.as_ref().and_then(|v| decode(v.value(), now));
                let sum = add_to_counter(live.map(|(value, _)| value), delta)?;
                (sum, live.map_or(0, |(_, expires)| expires))
            };
            let mut stored = encode(sum.to_string().as_bytes(), ttl);
            if expires != 0 {
                stored[..8].copy_from_slice(&expires.to_le_bytes());
            }
            table.insert(&key[..], &stored[..]).map_err(failed)?;
            Ok(sum)
        })
        .await
    }

    async fn list(&self, prefix: &[u8], after: &[u8], limit: usize) -> Result<Vec<Bytes>, KvError> {
        let now = now_ms();
        let start = if after > prefix { after } else { prefix };
        self.read(|table| {
            let mut keys = Vec::new();
            for item in table.range(start..)? {
                let (key, value) = item?;
                let key = key.value();
                if !key.starts_with(prefix) || keys.len() == limit {
                    break;
                }
                if listed(key, prefix, after) && decode(value.value(), now).is_some() {
                    keys.push(Bytes::copy_from_slice(key));
                }
            }
            Ok(keys)
        })
    }
}
