//! `wasi:keyvalue@0.2.0-draft` (store, atomics, batch) over the worker's KV namespaces: a
//! bucket is a granted namespace, opened by its name, in whichever backend it lives (memory,
//! redb, Redis). The same limits as the core ABI's KV calls apply: `kv_ops` (a batch counts
//! each key), `kv_value`, keys of at most 512 bytes, and the host-call budget (each call is a
//! host call, counted by the store's call hook). Each operation is counted in
//! `edgegate_kv_operations_total` like a module's.
//!
//! What the guest did wrong (a name it was not granted, a key or value over its cap, a spent
//! `kv_ops` budget, a counter that is not one) and what the store failed at (Redis down or
//! slow) are the interface's `error` values, for the guest to handle; a bucket handle it does
//! not hold is a trap.

use bytes::Bytes;
use edgegate_abi::kv::{MAX_KEY_LEN, MAX_LIST};
use edgegate_kv::metrics::Op;
use edgegate_kv::{Backend, KvError, Store};
use wasmtime::component::Resource;

use super::bindings::keyvalue::store::{Error, KeyResponse};
use super::bindings::keyvalue::{atomics, batch, store};
use super::bucket::{Bucket, KvFailure};
use super::state::ComponentState;

type Result<T> = std::result::Result<T, KvFailure>;

fn refused(message: String) -> KvFailure {
    KvFailure::Guest(message)
}

fn check_key(key: &str) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(refused(format!(
            "a key of {} bytes: keys are at most {MAX_KEY_LEN}",
            key.len()
        )));
    }
    Ok(())
}

impl ComponentState {
    /// The open bucket's namespace, after charging `ops` KV operations to the request.
    fn bucket(&mut self, bucket: &Resource<Bucket>, ops: usize) -> Result<usize> {
        let ns = self.table.get(bucket)?.ns();
        let budget = self.worker.limits.kv_ops;
        let ops = u32::try_from(ops.max(1)).unwrap_or(u32::MAX);
        if !self.meter.kv(ops, budget) {
            return Err(refused(format!(
                "{ops} more KV operations would pass this request's kv_ops limit of {budget}"
            )));
        }
        Ok(ns)
    }

    fn store(&self, ns: usize) -> Store {
        self.worker.kv[ns].store.clone()
    }

    fn check_value(&self, value: &[u8]) -> Result<()> {
        let cap = self.worker.limits.kv_value;
        if value.len() as u64 > cap {
            return Err(refused(format!("a value of {} bytes: over kv_value, {cap}", value.len())));
        }
        Ok(())
    }

    /// The store's failure as the guest's error; the store's own (down, slow) logged.
    fn failed(&self, ns: usize, error: KvError) -> KvFailure {
        if matches!(error, KvError::Unavailable(_) | KvError::Timeout(_)) {
            tracing::warn!(
                worker = %self.worker.name,
                request_id = %self.request_id,
                namespace = %self.worker.kv[ns].name,
                "kv: {error}"
            );
        }
        refused(error.to_string())
    }
}

impl store::Host for ComponentState {
    async fn open(&mut self, identifier: String) -> Result<Resource<Bucket>> {
        let Some(ns) = self.worker.kv.iter().position(|ns| *ns.name == identifier) else {
            let granted: Vec<&str> = self.worker.kv.iter().map(|ns| &*ns.name).collect();
            return Err(refused(format!(
                "no KV namespace {identifier:?} is granted to worker {:?} (granted: {granted:?})",
                self.worker.name
            )));
        };
        Ok(self.table.push(Bucket::new(ns))?)
    }

    fn convert_error(&mut self, failure: KvFailure) -> wasmtime::Result<Error> {
        match failure {
            KvFailure::Guest(message) => Ok(Error::Other(message)),
            KvFailure::Trap(trap) => Err(trap),
        }
    }
}

impl store::HostBucket for ComponentState {
    async fn get(&mut self, bucket: Resource<Bucket>, key: String) -> Result<Option<Vec<u8>>> {
        let ns = self.bucket(&bucket, 1)?;
        check_key(&key)?;
        let store = self.store(ns);
        match store.observed(Op::Get, store.get(key.as_bytes())).await {
            Ok(value) => Ok(value.map(Vec::from)),
            Err(error) => Err(self.failed(ns, error)),
        }
    }

    async fn set(&mut self, bucket: Resource<Bucket>, key: String, value: Vec<u8>) -> Result<()> {
        let ns = self.bucket(&bucket, 1)?;
        check_key(&key)?;
        self.check_value(&value)?;
        let store = self.store(ns);
        let put = store.put(key.as_bytes(), &value, None);
        store.observed(Op::Put, put).await.map_err(|error| self.failed(ns, error))
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Result<()> {
        let ns = self.bucket(&bucket, 1)?;
        check_key(&key)?;
        let store = self.store(ns);
        match store.observed(Op::Delete, store.delete(key.as_bytes())).await {
            Ok(_existed) => Ok(()),
            Err(error) => Err(self.failed(ns, error)),
        }
    }

    async fn exists(&mut self, bucket: Resource<Bucket>, key: String) -> Result<bool> {
        let ns = self.bucket(&bucket, 1)?;
        check_key(&key)?;
        let store = self.store(ns);
        match store.observed(Op::Get, store.get(key.as_bytes())).await {
            Ok(value) => Ok(value.is_some()),
            Err(error) => Err(self.failed(ns, error)),
        }
    }

    /// Up to 1,000 keys a page, in bytewise order; a page that is full comes with a cursor
    /// for the next. A cursor is this bucket's own (an index of the keys it continues after):
    /// one it did not hand out is an error. Keys that are not UTF-8 (a core module may write
    /// them) cannot be a WIT `string` and are left out.
    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> Result<KeyResponse> {
        let ns = self.bucket(&bucket, 1)?;
        let after = match cursor {
            None => Bytes::new(),
            Some(cursor) => match self.table.get(&bucket)?.after(cursor) {
                Some(after) => after,
                None => return Err(refused(format!("cursor {cursor} is not this bucket's"))),
            },
        };
        let store = self.store(ns);
        let listed = store.observed(Op::List, store.list(b"", &after, MAX_LIST as usize)).await;
        let keys = listed.map_err(|error| self.failed(ns, error))?;
        let cursor = match keys.last() {
            Some(last) if keys.len() == MAX_LIST as usize => {
                Some(self.table.get_mut(&bucket)?.continue_after(last.clone()))
            }
            _ => None,
        };
        let keys = keys.into_iter().filter_map(|key| String::from_utf8(key.into()).ok()).collect();
        Ok(KeyResponse { keys, cursor })
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for ComponentState {
    /// Adds `delta` to the counter under `key` (a missing key is 0), stored as decimal text as
    /// the core ABI's `kv_incr` stores it, atomically in every backend.
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> Result<u64> {
        let ns = self.bucket(&bucket, 1)?;
        check_key(&key)?;
        let delta = i64::try_from(delta)
            .map_err(|_| refused(format!("a delta of {delta}: counters are 64-bit signed")))?;
        let store = self.store(ns);
        let sum = store.observed(Op::Incr, store.incr(key.as_bytes(), delta, None)).await;
        let sum = sum.map_err(|error| self.failed(ns, error))?;
        u64::try_from(sum).map_err(|_| refused(format!("the counter {key:?} is negative: {sum}")))
    }
}

impl batch::Host for ComponentState {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Result<Vec<Option<(String, Vec<u8>)>>> {
        let ns = self.bucket(&bucket, keys.len())?;
        keys.iter().try_for_each(|key| check_key(key))?;
        let store = self.store(ns);
        let wanted: Vec<&[u8]> = keys.iter().map(|key| key.as_bytes()).collect();
        let values = store.observed(Op::GetBatch, store.get_many(&wanted)).await;
        let values = values.map_err(|error| self.failed(ns, error))?;
        Ok(keys.into_iter().zip(values).map(|(key, value)| Some((key, value?.into()))).collect())
    }

    /// One transaction on disk and in Redis: all the entries or none.
    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        let ns = self.bucket(&bucket, key_values.len())?;
        for (key, value) in &key_values {
            check_key(key)?;
            self.check_value(value)?;
        }
        let store = self.store(ns);
        let entries: Vec<(&[u8], &[u8])> =
            key_values.iter().map(|(key, value)| (key.as_bytes(), &value[..])).collect();
        let put = store.put_many(&entries, None);
        store.observed(Op::PutBatch, put).await.map_err(|error| self.failed(ns, error))
    }

    async fn delete_many(&mut self, bucket: Resource<Bucket>, keys: Vec<String>) -> Result<()> {
        let ns = self.bucket(&bucket, keys.len())?;
        keys.iter().try_for_each(|key| check_key(key))?;
        let store = self.store(ns);
        for key in &keys {
            let deleted = store.observed(Op::Delete, store.delete(key.as_bytes())).await;
            deleted.map_err(|error| self.failed(ns, error))?;
        }
        Ok(())
    }
}
