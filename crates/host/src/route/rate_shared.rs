//! A `scope = "shared"` policy's counts: in Redis, one count per key for every gateway that
//! uses the same Redis, decided there in one round trip ([`RedisStore::gcra`]).
//!
//! ```text
//! decide ─▶ Redis refused this key until a moment still to come ─▶ refused, not asked
//!        ├▶ Redis answered within `timeout` ─▶ its decision
//!        └▶ it failed, timed out, or failed less than RETRY_AFTER ago
//!              ├▶ on_error = fail_open:   this process's own count decides (the fallback bucket)
//!              └▶ on_error = fail_closed: 503 rate_limit_unavailable
//! ```
//!
//! A refusal is remembered until the moment Redis said the key's next request would pass:
//! until then the key's requests are refused here, without asking. That is exact, not a
//! guess: a key's next allowed moment only ever moves later (other gateways' requests move
//! it on; nothing moves it back), so Redis would refuse them too. A client hammering past its
//! limit, the case a limit exists for, costs Redis one call per refusal period per gateway.
//!
//! After a failure the policy leaves Redis alone for [`RETRY_AFTER`]: a Redis that hangs costs
//! one request's `timeout` per period, not every request's. Then one request tries it again;
//! if Redis answers, every decision goes back to it. Failures are counted, and logged at most
//! once per [`LOG_EVERY`] with how many were not logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use edgegate_kv::{Gcra, KvError, RedisSettings, RedisStore};

use super::rate_local::Decision;
use crate::capability::kv::{SetupError, redis_url};
use crate::config::{ConfigError, Loaded, OnError, RateLimitConfig};
use crate::observe::metrics::{Count, CountsBy, LabelValue, counter};

/// How long a policy decides without Redis after it failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The shortest time between two warnings of one policy.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// A decision's Redis call's bound, unless the policy sets `timeout`.
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

/// Why Redis did not decide: a label of `edgegate_rate_limit_redis_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    Timeout,
    Unavailable,
    /// Not asked: it failed less than [`RETRY_AFTER`] ago.
    Skipped,
}

impl LabelValue for Failure {
    const LABEL: &'static str = "error";
    const ALL: &'static [Self] = &[Self::Timeout, Self::Unavailable, Self::Skipped];

    fn value(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Timeout => "it did not answer in time",
            Self::Unavailable => "it cannot be reached",
            Self::Skipped => "it failed less than a second ago",
        })
    }
}

/// One shared policy's Redis, and how it has been answering.
#[derive(Debug)]
pub(crate) struct SharedLimit {
    name: String,
    store: RedisStore,
    interval: Duration,
    burst: u32,
    /// Keys Redis refused, and until when it said they would be.
    refused: dashmap::DashMap<Vec<u8>, Instant>,
    pub(crate) on_error: OnError,
    /// Milliseconds since `epoch` until which decisions skip Redis; 0 while it answers.
    skip_until: AtomicU64,
    /// When the last warning was logged (ms since `epoch`), and failures since.
    logged_at: AtomicU64,
    unlogged: AtomicU64,
    epoch: Instant,
    /// `edgegate_rate_limit_redis_errors_total` by [`Failure`].
    errors: CountsBy<Failure>,
    /// `edgegate_rate_limit_local_fallbacks_total`.
    pub(crate) fallbacks: Arc<Count>,
    /// `edgegate_rate_limit_remembered_refusals_total`.
    remembered: Arc<Count>,
}

impl SharedLimit {
    /// The Redis of policy `name`: its own URL, or its `kv` namespace's. Connects lazily, so
    /// `edgegate check` and a start while Redis is down contact nothing. Must run inside a
    /// tokio runtime.
    pub(crate) fn new(
        name: &str,
        config: &RateLimitConfig,
        interval: Duration,
        loaded: &Loaded,
    ) -> Result<Self, ConfigError> {
        let error = |field: &str, e: SetupError| {
            ConfigError::caused(&loaded.file, format!("rate_limits.{name}.{field}"), e)
        };
        let (field, url) = match config.kv.as_ref().and_then(|kv| loaded.config.kv.get(kv)) {
            Some(kv) => ("kv", redis_url(loaded, &kv.url, &kv.url_env)),
            None => ("url", redis_url(loaded, &config.url, &config.url_env)),
        };
        let url = url.map_err(|e| error(field, e))?;
        let prefix = crate::config::redis::rate_prefix(name, config);
        let store = RedisStore::new(RedisSettings {
            url,
            timeout: config.timeout.unwrap_or(DEFAULT_TIMEOUT),
            prefix: prefix.into_bytes(),
        })
        .map_err(|e| error(field, SetupError::Store(e)))?;
        let labels = vec![("policy", name.to_owned())];
        Ok(Self {
            name: name.to_owned(),
            store,
            interval,
            burst: config.burst(),
            refused: Default::default(),
            on_error: config.on_error,
            skip_until: AtomicU64::new(0),
            logged_at: AtomicU64::new(0),
            unlogged: AtomicU64::new(0),
            epoch: Instant::now(),
            errors: CountsBy::new("edgegate_rate_limit_redis_errors_total", &labels),
            fallbacks: counter("edgegate_rate_limit_local_fallbacks_total", labels.clone()),
            remembered: counter("edgegate_rate_limit_remembered_refusals_total", labels),
        })
    }

    /// Redis's decision for one request of `key` (or the refusal it gave earlier, while it
    /// holds), or why there is none.
    pub(crate) async fn decide(&self, key: &[u8]) -> Result<Decision, Failure> {
        if let Some(decision) = self.remembered(key) {
            return Ok(decision);
        }
        if !self.may_ask() {
            return Err(self.failed(Failure::Skipped, None));
        }
        // Before the call, so that a remembered refusal ends no later than Redis's: Redis
        // read its clock after this.
        let asked = Instant::now();
        match self.store.gcra(key, self.interval, self.burst).await {
            Ok(answer) => {
                if self.skip_until.swap(0, Relaxed) != 0 {
                    tracing::info!(policy = %self.name, "rate limit: Redis answers again");
                }
                Ok(match answer {
                    Gcra::Allowed { remaining, reset } => Decision::Allowed { remaining, reset },
                    Gcra::Limited { retry_after } => {
                        self.refused.insert(key.to_vec(), asked + retry_after);
                        Decision::Limited { retry_after }
                    }
                })
            }
            Err(e) => {
                self.skip_until.store(self.now() + RETRY_AFTER.as_millis() as u64, Relaxed);
                let failure = match e {
                    KvError::Timeout(_) => Failure::Timeout,
                    _ => Failure::Unavailable,
                };
                Err(self.failed(failure, Some(&e)))
            }
        }
    }

    /// The refusal Redis gave `key`, if it still holds.
    fn remembered(&self, key: &[u8]) -> Option<Decision> {
        // Most keys are never refused: no clock read for them.
        let until = *self.refused.get(key)?;
        let retry_after = until.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
        self.remembered.increment(1);
        Some(Decision::Limited { retry_after })
    }

    /// Forgets refusals that no longer hold.
    pub(crate) fn forget_spent(&self) {
        let now = Instant::now();
        self.refused.retain(|_, until| now < *until);
    }

    /// Milliseconds since `epoch`, from 1: 0 is "not skipping".
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// Whether this decision asks Redis: always while it answers; after a failure, one
    /// decision once [`RETRY_AFTER`] has passed (the others keep skipping while it asks).
    fn may_ask(&self) -> bool {
        let until = self.skip_until.load(Relaxed);
        if until == 0 {
            return true;
        }
        let now = self.now();
        let next = now + RETRY_AFTER.as_millis() as u64;
        now >= until && self.skip_until.compare_exchange(until, next, Relaxed, Relaxed).is_ok()
    }

    /// Counts a failure, and warns of it unless a warning went out less than [`LOG_EVERY`]
    /// ago.
    fn failed(&self, failure: Failure, error: Option<&KvError>) -> Failure {
        self.errors.increment(failure);
        let now = self.now();
        let last = self.logged_at.load(Relaxed);
        let due = last == 0 || now >= last + LOG_EVERY.as_millis() as u64;
        if !(due && self.logged_at.compare_exchange(last, now, Relaxed, Relaxed).is_ok()) {
            self.unlogged.fetch_add(1, Relaxed);
            return failure;
        }
        let unlogged = self.unlogged.swap(0, Relaxed);
        let error = error.map_or_else(|| "it failed recently".to_owned(), ToString::to_string);
        let instead = match self.on_error {
            OnError::FailOpen => "deciding in this process (on_error = fail_open)",
            OnError::FailClosed => "refusing with 503 (on_error = fail_closed)",
        };
        tracing::warn!(
            policy = %self.name,
            %error,
            failures_not_logged = unlogged,
            "rate limit: Redis cannot decide; {instead}"
        );
        failure
    }
}
