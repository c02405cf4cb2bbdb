//! A split route's choice of target, per request.
//!
//! ```text
//!  override header (with the admin token)? ─▶ that target
//!  rules, in order: header / cookie / query / claim / User-Agent matches? ─▶ the rule's target
//!  weights: bucket = FNV-1a-64(salt ‖ sticky key) mod 10 000 (random without a key)
//!           targets own consecutive ranges of buckets, in declaration order
//! ```
//!
//! The hash is FNV-1a (64-bit), a specified algorithm, so a user's bucket is the same in
//! every process and every release; `std`'s `DefaultHasher` promises neither. Because the
//! ranges follow the declaration order, raising a later target's weight only moves the top
//! of the earlier ranges to it: a ramp from 10 % to 50 % moves users toward the new side and
//! none back.
//!
//! Claims come from the bearer token, verified in the host with the keys and policy of the
//! worker the split's `jwt` names (crate::route::claims), only when a rule or the sticky key reads
//! one.

use std::borrow::Cow;
use std::sync::Arc;

use http::HeaderName;
use http::request::Parts;
use regex::Regex;

use crate::config::token::Token;
use crate::config::{SplitConfig, SplitRuleConfig};
use crate::observe::metrics::LabelValue;
use crate::route::claims::{ClaimSource, Claims};
use crate::route::shadow::Shadow;

/// Buckets the weights divide.
pub(crate) const BUCKETS: u32 = 10_000;

/// The header that names a target, honoured only beside [`OVERRIDE_TOKEN`].
pub(crate) const OVERRIDE: &str = "x-edgegate-target";

/// The header that must carry the admin token for [`OVERRIDE`] to count.
pub(crate) const OVERRIDE_TOKEN: &str = "x-edgegate-admin-token";

/// A split route's targets (each a `T`) and how one is chosen.
#[derive(Debug)]
pub(crate) struct Split<T> {
    salt: Vec<u8>,
    sticky: Option<Key>,
    rules: Vec<Rule>,
    /// Each target's name, the end of its bucket range (exclusive), and the target.
    targets: Vec<(String, u32, T)>,
    /// The target a failed worker's idempotent request is tried again on.
    fallback: Option<usize>,
    /// The target requests are shadowed to, and how.
    shadow: Option<(usize, Arc<Shadow>)>,
    /// What verifies the token claim rules and a claim sticky key read.
    claims: Option<ClaimSource>,
}

/// How a target was chosen, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum By {
    /// The override header, with the admin token.
    Override,
    /// A rule matched.
    Rule,
    /// The weights, on the sticky key.
    Sticky,
    /// The weights, at random (no sticky key in the request, or none configured).
    Random,
}

impl LabelValue for By {
    const LABEL: &'static str = "by";
    const ALL: &'static [Self] = &[Self::Override, Self::Rule, Self::Sticky, Self::Random];

    fn value(self) -> &'static str {
        match self {
            Self::Override => "override",
            Self::Rule => "rule",
            Self::Sticky => "sticky",
            Self::Random => "random",
        }
    }
}

/// Where a value is read from.
#[derive(Debug)]
enum Key {
    Header(HeaderName),
    Cookie(String),
    Query(String),
    Claim(String),
    UserAgent,
}

#[derive(Debug)]
enum Matcher {
    Exact(String),
    Prefix(String),
    Contains(String),
    Regex(Regex),
}

#[derive(Debug)]
struct Rule {
    on: Key,
    matcher: Matcher,
    target: usize,
}

impl<T> Split<T> {
    /// The split of `config` (validated) over `targets`, one per `config.targets`, in order;
    /// `route` is the default salt. `claims` verifies tokens when `config` reads claims.
    pub(crate) fn new(
        config: &SplitConfig,
        route: &str,
        targets: Vec<T>,
        claims: Option<ClaimSource>,
    ) -> Self {
        let total: u64 = config.targets.iter().map(|t| u64::from(t.weight)).sum();
        let mut sum = 0u64;
        let targets = config
            .targets
            .iter()
            .zip(targets)
            .map(|(t, target)| {
                sum += u64::from(t.weight);
                (t.name.clone(), (sum * u64::from(BUCKETS) / total.max(1)) as u32, target)
            })
            .collect();
        let index = |name: &str| config.targets.iter().position(|t| t.name == name).unwrap_or(0);
        Self {
            salt: config.salt.as_deref().unwrap_or(route).as_bytes().to_vec(),
            sticky: config.sticky.as_ref().map(|s| match (&s.header, &s.claim, &s.cookie) {
                (Some(header), ..) => Key::Header(header_name(header)),
                (_, Some(claim), _) => Key::Claim(claim.clone()),
                (.., cookie) => Key::Cookie(cookie.clone().unwrap_or_default()),
            }),
            rules: config.rules.iter().map(|r| rule(r, index(&r.target))).collect(),
            fallback: config.fallback.as_deref().map(index),
            shadow: config
                .shadow
                .as_ref()
                .map(|s| (index(&s.target), Arc::new(Shadow::new(s, route)))),
            targets,
            claims,
        }
    }

    /// The shadow target and settings for a request `chosen` served; none when `chosen` is
    /// the shadow target itself.
    pub(crate) fn shadow(&self, chosen: &str) -> Option<(&T, &Arc<Shadow>)> {
        let (index, shadow) = self.shadow.as_ref()?;
        let (name, _, target) = &self.targets[*index];
        (name != chosen).then_some((target, shadow))
    }

    /// The fallback target, and its name, for a request `chosen` served first; none when
    /// `chosen` is the fallback itself.
    pub(crate) fn fallback(&self, chosen: &str) -> Option<(&str, &T)> {
        let (name, _, target) = &self.targets[self.fallback?];
        (name != chosen).then_some((name.as_str(), target))
    }

    /// The target for the request in `parts`, its name, and how it was chosen. `token` is
    /// the admin token the override needs.
    pub(crate) fn choose(&self, parts: &Parts, token: &Token) -> (&str, &T, By) {
        let (index, by) = self.index(parts, token);
        let (name, _, target) = &self.targets[index];
        (name, target, by)
    }

    fn index(&self, parts: &Parts, token: &Token) -> (usize, By) {
        let headers = &parts.headers;
        if let (Some(wanted), Some(given)) = (headers.get(OVERRIDE), headers.get(OVERRIDE_TOKEN))
            && token.is(given.as_bytes())
            && let Some(i) =
                self.targets.iter().position(|(n, ..)| n.as_bytes() == wanted.as_bytes())
        {
            return (i, By::Override);
        }
        let claims = Claims::new(self.claims.as_ref(), headers);
        for rule in &self.rules {
            let matches = match &rule.on {
                Key::Claim(name) => claims.values(name).iter().any(|v| rule.matcher.matches(v)),
                on => value(on, parts).is_some_and(|v| rule.matcher.matches(v)),
            };
            if matches {
                return (rule.target, By::Rule);
            }
        }
        let key = self.sticky.as_ref().and_then(|key| match key {
            Key::Claim(name) => claims.key(name),
            on => value(on, parts).map(Cow::Borrowed),
        });
        let (bucket, by) = match key {
            Some(key) => (bucket(&self.salt, key.as_bytes()), By::Sticky),
            None => ((getrandom::u64().unwrap_or(0) % u64::from(BUCKETS)) as u32, By::Random),
        };
        (self.targets.iter().position(|(_, end, _)| bucket < *end).unwrap_or(0), by)
    }
}

/// The bucket of `key` under `salt`: FNV-1a-64 of their concatenation, modulo [`BUCKETS`].
pub(crate) fn bucket(salt: &[u8], key: &[u8]) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = salt.iter().chain(key).fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    (hash % u64::from(BUCKETS)) as u32
}

fn header_name(name: &str) -> HeaderName {
    // Validated as a header name.
    HeaderName::from_bytes(name.as_bytes()).unwrap_or(HeaderName::from_static("x-invalid"))
}

fn rule(config: &SplitRuleConfig, target: usize) -> Rule {
    let on = match (&config.header, &config.cookie, &config.query, &config.claim) {
        (Some(header), ..) => Key::Header(header_name(header)),
        (_, Some(cookie), ..) => Key::Cookie(cookie.clone()),
        (_, _, Some(query), _) => Key::Query(query.clone()),
        (.., Some(claim)) => Key::Claim(claim.clone()),
        _ => Key::UserAgent,
    };
    let matcher = match (&config.user_agent, &config.value, &config.prefix) {
        // Validated as a regular expression.
        (Some(pattern), ..) if config.regex => {
            Regex::new(pattern).map_or(Matcher::Contains(pattern.clone()), Matcher::Regex)
        }
        (Some(substring), ..) => Matcher::Contains(substring.clone()),
        (_, Some(value), _) => Matcher::Exact(value.clone()),
        (.., prefix) => Matcher::Prefix(prefix.clone().unwrap_or_default()),
    };
    Rule { on, matcher, target }
}

impl Matcher {
    fn matches(&self, value: &str) -> bool {
        match self {
            Self::Exact(wanted) => value == wanted,
            Self::Prefix(prefix) => value.starts_with(prefix.as_str()),
            Self::Contains(part) => value.contains(part.as_str()),
            Self::Regex(regex) => regex.is_match(value),
        }
    }
}

/// The request's value at `key`: a header, a cookie, a query parameter (the first of its
/// name; not percent-decoded), the User-Agent. Claims are read through [`Claims`].
fn value<'a>(key: &Key, parts: &'a Parts) -> Option<&'a str> {
    match key {
        Key::Claim(_) => None,
        Key::Header(name) => parts.headers.get(name)?.to_str().ok(),
        Key::UserAgent => parts.headers.get(http::header::USER_AGENT)?.to_str().ok(),
        Key::Cookie(name) => super::cookie(&parts.headers, name),
        Key::Query(name) => parts.uri.query()?.split('&').find_map(|pair| {
            let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
            (n == name).then_some(v)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_specified_function() {
        // FNV-1a-64 of "" and "a" (the published test vectors), modulo the buckets.
        assert_eq!(bucket(b"", b""), (0xcbf2_9ce4_8422_2325u64 % 10_000) as u32);
        assert_eq!(bucket(b"", b"a"), (0xaf63_dc4c_8601_ec8cu64 % 10_000) as u32);
        assert_eq!(bucket(b"a", b""), bucket(b"", b"a"), "salt ‖ key, concatenated");
    }
}
