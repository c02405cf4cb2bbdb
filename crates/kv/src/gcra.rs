//! A rate count shared by every gateway that uses the same Redis: GCRA, decided on the server
//! in one round trip.
//!
//! One Lua script per decision (`EVALSHA`; `redis`'s [`Script`] loads it once per server with
//! `SCRIPT LOAD` when Redis answers `NOSCRIPT`). It reads the key's theoretical arrival time
//! (TAT), decides, and writes the new TAT with an expiry at the moment the key would be back
//! to a full burst, so an idle key costs nothing and needs no sweep. Time is Redis's `TIME`,
//! never a gateway's clock: gateways whose clocks disagree still share one count. Times are
//! integer microseconds (2⁵¹ µs is 71 years, exact in Lua's doubles).
//!
//! Crates that ship such a script (`redis-rate`, `tower-rate-limit-redis`) depend on
//! `redis` 0.29 and 0.32, a second Redis client beside the workspace's `redis` 1; the script
//! is a dozen lines.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use crate::{KvError, RedisStore};

/// KEYS[1]: the key. ARGV[1]: the emission interval, µs (`period / requests`); ARGV[2]: the
/// burst. Answers {1 if let through, requests left in the burst, µs until the key is back to
/// a full burst (let through) or until its next request would be (refused)}.
const SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local next_tat = tat + interval
local allow_at = next_tat - interval * tonumber(ARGV[2])
if now < allow_at then
  return {0, 0, allow_at - now}
end
redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', math.ceil((next_tat - now) / 1000))
return {1, math.floor((now - allow_at) / interval), next_tat - now}
";

static GCRA: LazyLock<Script> = LazyLock::new(|| Script::new(SCRIPT));

/// What Redis decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gcra {
    /// Let through: `remaining` more could go at once; the key is back to a full burst in
    /// `reset`.
    Allowed {
        /// Requests left in the burst.
        remaining: u32,
        /// Until the key's count is back to full.
        reset: Duration,
    },
    /// Refused: the key's next request passes in `retry_after`.
    Limited {
        /// Until the next request would be let through.
        retry_after: Duration,
    },
}

impl RedisStore {
    /// Counts one request of `key` (prefixed like every key of this store) against a rate of
    /// one per `interval` with `burst` at once. One round trip, bounded by the store's
    /// timeout.
    pub async fn gcra(&self, key: &[u8], interval: Duration, burst: u32) -> Result<Gcra, KvError> {
        let mut invocation = GCRA.key(self.key(key));
        let micros = u64::try_from(interval.as_micros()).unwrap_or(u64::MAX).max(1);
        invocation.arg(micros).arg(burst.max(1));
        let (allowed, remaining, wait): (u8, u32, u64) =
            self.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await?;
        let wait = Duration::from_micros(wait);
        Ok(if allowed == 1 {
            Gcra::Allowed { remaining, reset: wait }
        } else {
            Gcra::Limited { retry_after: wait }
        })
    }
}
