//! A `[rate_limits.NAME]` policy at work on a route: its key, its decision, by this process's
//! count ([`rate_local`]) or Redis's ([`rate_shared`], with this process's count as the
//! fallback when Redis cannot decide), the 429 or 503, and the metrics.
//!
//! [`rate_local`]: super::rate_local
//! [`rate_shared`]: super::rate_shared

use super::rate_key::{Facts, key};
use super::rate_local::{Decision, LocalLimit};
use super::rate_shared::{Failure, SharedLimit};
use crate::config::{ConfigError, KeyPart, Loaded, OnError, RateLimitConfig, Scope};
use crate::error::{ErrorKind, RequestError};
use crate::observe::metrics::{Count, CountsBy, LabelValue, counter};

/// A policy in force: its parts, whether it refuses, and its counts. Shared by every route
/// that names it, and by the next snapshot while its table is unchanged (a reload keeps the
/// counts).
#[derive(Debug)]
pub(crate) struct Policy {
    config: RateLimitConfig,
    parts: Vec<KeyPart>,
    /// The counts in this process: the policy's, or a shared policy's fallback bucket.
    limit: LocalLimit,
    /// A shared policy's Redis.
    shared: Option<SharedLimit>,
    /// Decisions since the idle keys were last forgotten.
    decisions: std::sync::atomic::AtomicU64,
}

/// How many decisions a policy makes between two sweeps of its idle keys.
const SWEEP_EVERY: u64 = 8192;

impl Policy {
    /// Policy `name` as configured; validation checked its key parts and where a shared one's
    /// Redis is. Must run inside a tokio runtime.
    pub(crate) fn new(
        name: &str,
        config: &RateLimitConfig,
        loaded: &Loaded,
    ) -> Result<Self, ConfigError> {
        let limit = LocalLimit::new(name, config);
        let shared = match config.scope {
            Scope::Local => None,
            Scope::Shared => Some(SharedLimit::new(name, config, limit.interval, loaded)?),
        };
        Ok(Self {
            config: config.clone(),
            parts: config.key.iter().filter_map(|p| KeyPart::parse(p).ok()).collect(),
            limit,
            shared,
            decisions: Default::default(),
        })
    }

    /// Whether it was built from `config`: a reload keeps it, and its counts, if so.
    pub(crate) fn is(&self, config: &RateLimitConfig) -> bool {
        self.config == *config
    }

    /// The decision for one request of `key`: Redis's for a shared policy (or, when it
    /// cannot, this process's or none, as `on_error` says); this process's otherwise.
    async fn decide(&self, key: Vec<u8>) -> Result<Decision, Failure> {
        let Some(shared) = &self.shared else { return Ok(self.limit.decide(key)) };
        // Boxed: a Redis call's future is large, and the request's would carry it even when
        // every policy is local.
        let failure = match Box::pin(shared.decide(&key)).await {
            Ok(decision) => return Ok(decision),
            Err(failure) => failure,
        };
        match shared.on_error {
            OnError::FailOpen => {
                shared.fallbacks.increment(1);
                Ok(self.limit.decide(key))
            }
            OnError::FailClosed => Err(failure),
        }
    }
}

/// What a policy decided for one request: the `outcome` of
/// `edgegate_rate_limit_decisions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Allowed,
    Limited,
    /// Over the limit, and let through: the policy is a dry run.
    DryRunLimited,
    /// The request has no key to count it by: let through.
    NoKey,
    /// A shared policy whose Redis could not decide.
    Unavailable,
}

impl LabelValue for Outcome {
    const LABEL: &'static str = "outcome";
    const ALL: &'static [Self] =
        &[Self::Allowed, Self::Limited, Self::DryRunLimited, Self::NoKey, Self::Unavailable];

    fn value(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Limited => "limited",
            Self::DryRunLimited => "dry_run_limited",
            Self::NoKey => "no_key",
            Self::Unavailable => "unavailable",
        }
    }
}

/// A policy as one route applies it, with that route's series.
#[derive(Debug, Clone)]
pub(crate) struct RouteLimit {
    policy: std::sync::Arc<Policy>,
    /// `edgegate_rate_limit_decisions_total`.
    outcomes: std::sync::Arc<CountsBy<Outcome>>,
    /// `edgegate_rate_limited_total`.
    refused: std::sync::Arc<Count>,
}

impl RouteLimit {
    pub(crate) fn new(policy: std::sync::Arc<Policy>, name: &str, route: &str) -> Self {
        let labels = vec![("policy", name.to_owned()), ("route", route.to_owned())];
        let outcomes = CountsBy::new("edgegate_rate_limit_decisions_total", &labels);
        let refused = counter("edgegate_rate_limited_total", labels);
        Self { policy, outcomes: std::sync::Arc::new(outcomes), refused }
    }

    /// Counts the request `facts` describe: `Err` if the policy refuses it (429, with
    /// `Retry-After` and the draft's headers), or if a shared policy that fails closed cannot
    /// decide (503).
    pub(crate) async fn admit(&self, facts: &Facts<'_>) -> Result<(), RequestError> {
        let policy = &*self.policy;
        if policy.decisions.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SWEEP_EVERY
            == SWEEP_EVERY - 1
        {
            policy.limit.forget_idle();
            if let Some(shared) = &policy.shared {
                shared.forget_spent();
            }
        }
        let Some(key) = key(&policy.parts, facts) else {
            self.outcomes.increment(Outcome::NoKey);
            return Ok(());
        };
        let decision = match policy.decide(key).await {
            Ok(decision) => decision,
            Err(failure) => {
                self.outcomes.increment(Outcome::Unavailable);
                return Err(RequestError::new(
                    ErrorKind::RateLimitUnavailable,
                    format!(
                        "rate limit `{}`: no decision from Redis: {failure}",
                        policy.limit.name
                    ),
                ));
            }
        };
        let Decision::Limited { retry_after } = decision else {
            self.outcomes.increment(Outcome::Allowed);
            return Ok(());
        };
        if policy.config.dry_run {
            self.outcomes.increment(Outcome::DryRunLimited);
            return Ok(());
        }
        self.outcomes.increment(Outcome::Limited);
        self.refused.increment(1);
        let mut error = RequestError::new(
            ErrorKind::RateLimited,
            format!("rate limit `{}`: retry in {retry_after:?}", policy.limit.name),
        );
        error.headers = Some(Box::new(policy.limit.headers(&decision)));
        Err(error)
    }
}
