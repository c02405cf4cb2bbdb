//! The Redis backend, for several gateway nodes sharing state.
//!
//! One multiplexed connection per namespace (`redis`'s `ConnectionManager`), opened lazily: a
//! gateway starts while Redis is down, and its calls fail with [`KvError::Unavailable`] until
//! Redis answers. When the connection breaks, the manager reconnects in the background;
//! meanwhile calls fail fast. Every call is bounded by `timeout` ([`KvError::Timeout`]), so a
//! Redis that hangs never holds a request longer than that.
//!
//! Keys are stored as `prefix + key` (by default `edgegate:kv:{namespace}:`), so namespaces (and
//! other users of the same Redis) do not collide. A TTL is `PX`; a batch is one `MULTI`/`EXEC`;
//! `incr` is a small Lua script (`INCRBY`, then `PEXPIRE` when the key has no expiry), atomic on
//! the server. `list` walks `SCAN MATCH prefix*` and sorts: O(keys in the database) per call,
//! for administration rather than a request's hot path.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Client, RedisError, Script};

use crate::{Backend, KvError, listed};

/// How to reach Redis.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://[user:password@]host:port[/db]`.
    pub url: String,
    /// Every call's bound, from sending to the answer (and a connection attempt's).
    pub timeout: Duration,
    /// Prepended to every key.
    pub prefix: Vec<u8>,
}

/// A namespace in Redis.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    settings: RedisSettings,
    incr: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password.
        f.debug_struct("RedisStore").field("timeout", &self.settings.timeout).finish()
    }
}

const INCR: &str = r"
local sum = redis.call('INCRBY', KEYS[1], ARGV[1])
if tonumber(ARGV[2]) > 0 and redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return sum
";

impl RedisStore {
    /// Sets up the connection without waiting for it: Redis may be down now. Must run inside a
    /// tokio runtime. Fails only on a malformed URL.
    pub fn new(settings: RedisSettings) -> Result<Self, KvError> {
        let client = Client::open(settings.url.as_str())
            .map_err(|e| KvError::Unavailable(format!("redis url: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let conn = ConnectionManager::new_lazy_with_config(client, config).map_err(unavailable)?;
        Ok(Self { conn, settings, incr: Script::new(INCR) })
    }

    pub(crate) fn key(&self, key: &[u8]) -> Vec<u8> {
        [&self.settings.prefix[..], key].concat()
    }

    /// Runs one call on a clone of the connection (clones share it), within the timeout.
    pub(crate) async fn call<T, F, Fut>(&self, f: F) -> Result<T, KvError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        match tokio::time::timeout(self.settings.timeout, f(self.conn.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.is_timeout() => Err(KvError::Timeout(self.settings.timeout)),
            Ok(Err(e)) if is_not_an_integer(&e) => Err(KvError::NotAnInteger),
            Ok(Err(e)) => Err(unavailable(e)),
            Err(_) => Err(KvError::Timeout(self.settings.timeout)),
        }
    }
}

fn unavailable(e: RedisError) -> KvError {
    KvError::Unavailable(format!("redis: {e}"))
}

fn is_not_an_integer(e: &RedisError) -> bool {
    let text = e.to_string();
    text.contains("not an integer") || text.contains("would overflow")
}

fn px(ttl: Option<Duration>) -> Option<u64> {
    ttl.map(|ttl| (ttl.as_millis() as u64).max(1))
}

/// `SET key value [PX ms]` as a command.
fn set(key: Vec<u8>, value: &[u8], ttl: Option<Duration>) -> redis::Cmd {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(value);
    if let Some(ms) = px(ttl) {
        cmd.arg("PX").arg(ms);
    }
    cmd
}

/// `pattern` with the glob characters of `SCAN MATCH` escaped.
fn glob_escape(pattern: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(pattern.len() + 1);
    for &b in pattern {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

impl Backend for RedisStore {
    async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        let key = self.key(key);
        let value: Option<Vec<u8>> = self.call(|mut c| async move { c.get(key).await }).await?;
        Ok(value.map(Bytes::from))
    }

    async fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>, KvError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| self.key(k)).collect();
        let values: Vec<Option<Vec<u8>>> = self
            .call(|mut c| async move { redis::cmd("MGET").arg(keys).query_async(&mut c).await })
            .await?;
        Ok(values.into_iter().map(|v| v.map(Bytes::from)).collect())
    }

    async fn put(&self, key: &[u8], value: &[u8], ttl: Option<Duration>) -> Result<(), KvError> {
        let cmd = set(self.key(key), value, ttl);
        self.call(|mut c| async move { cmd.query_async::<()>(&mut c).await }).await
    }

    async fn put_many(
        &self,
        entries: &[(&[u8], &[u8])],
        ttl: Option<Duration>,
    ) -> Result<(), KvError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (key, value) in entries {
            pipe.add_command(set(self.key(key), value, ttl)).ignore();
        }
        self.call(|mut c| async move { pipe.query_async::<()>(&mut c).await }).await
    }

    async fn delete(&self, key: &[u8]) -> Result<bool, KvError> {
        let key = self.key(key);
        let removed: u64 = self.call(|mut c| async move { c.del(key).await }).await?;
        Ok(removed > 0)
    }

    async fn incr(&self, key: &[u8], delta: i64, ttl: Option<Duration>) -> Result<i64, KvError> {
        let mut invocation = self.incr.key(self.key(key));
        invocation.arg(delta).arg(px(ttl).unwrap_or(0));
        self.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await
    }

    async fn list(&self, prefix: &[u8], after: &[u8], limit: usize) -> Result<Vec<Bytes>, KvError> {
        let ns = self.settings.prefix.len();
        let mut pattern = glob_escape(&self.key(prefix));
        pattern.push(b'*');
        let found: Vec<Vec<u8>> = self
            .call(|mut c| async move {
                let mut keys = Vec::new();
                let mut iter = c.scan_match::<_, Vec<u8>>(pattern).await?;
                while let Some(key) = iter.next_item().await {
                    keys.push(key?);
                }
                Ok(keys)
            })
            .await?;
        let mut keys: Vec<Bytes> = found
            .into_iter()
            .filter_map(|key| key.get(ns..).map(Bytes::copy_from_slice))
            .filter(|key| listed(key, prefix, after))
            .collect();
        keys.sort_unstable();
        keys.truncate(limit);
        Ok(keys)
    }
}
