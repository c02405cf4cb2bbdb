//! A rate-limit policy's counts in this process: a GCRA count per key, the decision, and the
//! IETF `RateLimit-Policy` / `RateLimit` headers that describe it
//! (draft-ietf-httpapi-ratelimit-headers).
//!
//! GCRA (the generic cell rate algorithm) keeps one timestamp per key, the theoretical
//! arrival time of the next request: a request is let through if it is not earlier than that
//! time minus the burst's tolerance, and moves it one emission interval (`per / requests`)
//! on. So a quiet key may make `burst` requests at once, then one per interval; unlike a
//! fixed window it never lets twice the rate through at a window's edge, and unlike a token
//! bucket it needs no refill timer. It is what NGINX `limit_req`, Envoy's local limit (as a
//! token bucket) and Cloudflare approximate, and what `governor` implements.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::middleware::StateInformationMiddleware;
use governor::{Quota, RateLimiter, clock::Clock, clock::DefaultClock};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::config::RateLimitConfig;

/// One policy's counts in this process.
pub(crate) struct LocalLimit {
    pub(crate) name: String,
    requests: u32,
    per: Duration,
    burst: u32,
    /// `per / requests`: how long one request's count takes to come back.
    pub(crate) interval: Duration,
    limiter: RateLimiter<
        Vec<u8>,
        governor::state::keyed::DefaultKeyedStateStore<Vec<u8>>,
        DefaultClock,
        StateInformationMiddleware,
    >,
    clock: DefaultClock,
}

impl std::fmt::Debug for LocalLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLimit")
            .field("name", &self.name)
            .field("requests", &self.requests)
            .field("per", &self.per)
            .field("burst", &self.burst)
            .finish_non_exhaustive()
    }
}

/// What a policy says of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Let through: `remaining` more could go at once, and the key's count is back to full
    /// in `reset`.
    Allowed { remaining: u32, reset: Duration },
    /// Refused: the next request this key makes would pass in `retry_after`.
    Limited { retry_after: Duration },
}

impl LocalLimit {
    /// The counts of policy `name`, empty. Validation made `requests`, `per` and `burst`
    /// positive.
    pub(crate) fn new(name: &str, policy: &RateLimitConfig) -> Self {
        let burst = NonZeroU32::new(policy.burst()).unwrap_or(NonZeroU32::MIN);
        let interval = (policy.per / policy.requests.max(1)).max(Duration::from_nanos(1));
        let quota = Quota::with_period(interval)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst);
        let clock = DefaultClock::default();
        let limiter = RateLimiter::<_, _, _, StateInformationMiddleware>::new(
            quota,
            Default::default(),
            clock.clone(),
        );
        Self {
            name: name.to_owned(),
            requests: policy.requests,
            per: policy.per,
            burst: burst.get(),
            interval,
            limiter,
            clock,
        }
    }

    /// Counts one request of `key`.
    pub(crate) fn decide(&self, key: Vec<u8>) -> Decision {
        match self.limiter.check_key(&key) {
            Ok(state) => {
                let remaining = state.remaining_burst_capacity();
                Decision::Allowed { remaining, reset: self.interval * (self.burst - remaining) }
            }
            Err(not_until) => {
                Decision::Limited { retry_after: not_until.wait_time_from(self.clock.now()) }
            }
        }
    }

    /// Forgets keys whose counts are back to full: a key is kept only while it matters.
    pub(crate) fn forget_idle(&self) {
        self.limiter.retain_recent();
    }

    /// How many keys are counted.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> usize {
        self.limiter.len()
    }

    /// The answer's headers for `decision`: `Retry-After` when refused, and the draft's
    /// `RateLimit-Policy` and `RateLimit`.
    pub(crate) fn headers(&self, decision: &Decision) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let mut put = |name: HeaderName, text: String| {
            if let Ok(value) = HeaderValue::from_str(&text) {
                headers.insert(name, value);
            }
        };
        if let Decision::Limited { retry_after } = decision {
            put(http::header::RETRY_AFTER, seconds_up(*retry_after).max(1).to_string());
        }
        put(HeaderName::from_static("ratelimit-policy"), self.policy_item());
        put(HeaderName::from_static("ratelimit"), self.state_item(decision));
        headers
    }

    /// The policy's `RateLimit-Policy` item: `"NAME";q=QUOTA;w=WINDOW`, the window in whole
    /// seconds (the draft's unit), the quota scaled to it.
    pub(crate) fn policy_item(&self) -> String {
        let window = self.per.as_secs_f64().ceil().max(1.0);
        let quota = (f64::from(self.requests) * window / self.per.as_secs_f64()).round() as u64;
        format!("{};q={quota};w={}", sf_string(&self.name), window as u64)
    }

    /// The `RateLimit` item for `decision`: `"NAME";r=REMAINING;t=SECONDS`, `t` rounded up
    /// so that a client that waits it is let through.
    pub(crate) fn state_item(&self, decision: &Decision) -> String {
        let (remaining, reset) = match *decision {
            Decision::Allowed { remaining, reset } => (remaining, reset),
            Decision::Limited { retry_after } => (0, retry_after),
        };
        format!("{};r={remaining};t={}", sf_string(&self.name), seconds_up(reset))
    }
}

/// Whole seconds, rounded up: what `Retry-After` and the draft's `t` carry.
pub(crate) fn seconds_up(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

/// `text` as an RFC 8941 sf-string: quoted, with `"` and `\` escaped. Policy names are
/// TOML keys, printable ASCII in practice; anything else is replaced by `?`.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> RateLimitConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_quiet_key_passes_its_burst_then_is_limited_until_an_interval_passes() {
        let limit = LocalLimit::new("per-ip", &policy("requests = 10\nburst = 3"));
        let decisions: Vec<_> = (0..4).map(|_| limit.decide(b"10.0.0.1".to_vec())).collect();
        let remaining: Vec<_> = decisions[..3]
            .iter()
            .map(|d| match d {
                Decision::Allowed { remaining, .. } => *remaining,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(remaining, [2, 1, 0]);
        let Decision::Limited { retry_after } = decisions[3] else { panic!("{decisions:?}") };
        assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_millis(100));
        // Another key is counted on its own.
        assert!(matches!(
            limit.decide(b"10.0.0.2".to_vec()),
            Decision::Allowed { remaining: 2, .. }
        ));
        assert_eq!(limit.keys(), 2);
    }

    #[test]
    fn the_headers_follow_the_draft_syntax() {
        let limit = LocalLimit::new("per-ip", &policy("requests = 100\nburst = 20"));
        assert_eq!(limit.policy_item(), "\"per-ip\";q=100;w=1");
        let allowed = Decision::Allowed { remaining: 19, reset: Duration::from_millis(10) };
        assert_eq!(limit.state_item(&allowed), "\"per-ip\";r=19;t=1");
        let limited = Decision::Limited { retry_after: Duration::from_millis(2500) };
        assert_eq!(limit.state_item(&limited), "\"per-ip\";r=0;t=3");
        let minute = LocalLimit::new("a\"b", &policy("requests = 30\nper = \"1m\""));
        assert_eq!(minute.policy_item(), "\"a\\\"b\";q=30;w=60");
        let fast = LocalLimit::new("x", &policy("requests = 5\nper = \"100ms\""));
        assert_eq!(fast.policy_item(), "\"x\";q=50;w=1");
        for item in [limit.policy_item(), limit.state_item(&allowed)] {
            sfv_item(&item);
        }
    }

    /// Checks `item` is an RFC 8941 list member: an sf-string with integer parameters.
    fn sfv_item(item: &str) {
        let (string, params) = item[1..].split_once('"').unwrap();
        assert!(item.starts_with('"') && !string.contains('"'), "{item}");
        for param in params.split(';').skip(1) {
            let (key, value) = param.split_once('=').unwrap();
            assert!(key.chars().all(|c| c.is_ascii_lowercase()), "{item}");
            assert!(value.chars().all(|c| c.is_ascii_digit()), "{item}");
        }
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(seconds_up(Duration::ZERO), 0);
        assert_eq!(seconds_up(Duration::from_millis(1)), 1);
        assert_eq!(seconds_up(Duration::from_secs(2)), 2);
    }
}
