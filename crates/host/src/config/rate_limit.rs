//! `[rate_limits.NAME]`: how many requests a client, a token or a route may make, and what
//! they are counted by. Routes name the policies that apply to them (`rate_limits = [...]`).
//! A policy is counted in each process (`scope = "local"`) or in Redis, shared by every
//! gateway that uses it (`scope = "shared"`).

use std::time::Duration;

use serde::Deserialize;

use super::{Config, ConfigError, KvBackend, duration, optional_duration};

/// `[rate_limits.NAME]`: a rate and a burst, per key, counted in this process or in Redis.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// How many requests each key may make per `per`, on average. Required.
    pub requests: u32,
    /// The period `requests` are counted over. Default 1s.
    #[serde(default = "RateLimitConfig::default_per", deserialize_with = "duration")]
    pub per: Duration,
    /// How many requests a key that has been quiet may make at once, above the rate. Default:
    /// `requests`.
    pub burst: Option<u32>,
    /// What a request is counted by: one or more of `ip`, `route`, `header:NAME`,
    /// `cookie:NAME`, `claim:NAME` (a claim of the token the route's identity verified).
    /// Requests with the same values share a count. Default `["ip"]`.
    #[serde(default = "RateLimitConfig::default_key")]
    pub key: Vec<String>,
    /// Count and report, but never refuse. Default false.
    #[serde(default)]
    pub dry_run: bool,
    /// Where the counts live: `local` (the default) or `shared`.
    #[serde(default)]
    pub scope: Scope,
    /// `shared`: the `[kv.NAME]` (with `backend = "redis"`) whose Redis holds the counts.
    pub kv: Option<String>,
    /// `shared`: the Redis holding the counts instead, `redis://[user:password@]host:port[/db]`.
    pub url: Option<String>,
    /// `shared`: the environment variable holding that URL (it may hold a password).
    pub url_env: Option<String>,
    /// `shared`: bound on a decision's Redis call. Default 50ms.
    #[serde(default, deserialize_with = "optional_duration")]
    pub timeout: Option<Duration>,
    /// `shared`: prepended to every key in Redis. Default `edgegate:rate:NAME:`.
    pub key_prefix: Option<String>,
    /// `shared`: what a decision does while Redis fails or is slower than `timeout`.
    #[serde(default)]
    pub on_error: OnError,
}

/// Where a policy's counts live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// In each gateway process, on its own.
    #[default]
    Local,
    /// In Redis, one count for every gateway that uses it.
    Shared,
}

/// What a shared policy does when Redis cannot decide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Decide in this process, by the same rate and burst counted here alone.
    #[default]
    FailOpen,
    /// Refuse: 503 `rate_limit_unavailable`.
    FailClosed,
}

impl RateLimitConfig {
    fn default_per() -> Duration {
        Duration::from_secs(1)
    }

    fn default_key() -> Vec<String> {
        vec!["ip".to_owned()]
    }

    /// The burst, `requests` unless set.
    pub fn burst(&self) -> u32 {
        self.burst.unwrap_or(self.requests)
    }
}

/// One part of a policy's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The client's address (the peer's, or what a trusted proxy says it is).
    Ip,
    /// The route's name.
    Route,
    /// A request header's value (its name in lower case).
    Header(String),
    /// A cookie's value.
    Cookie(String),
    /// A claim of the verified token.
    Claim(String),
}

impl KeyPart {
    /// Parses `ip`, `route`, `header:NAME`, `cookie:NAME` or `claim:NAME`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let named = |kind: &str, name: &str| {
            if name.is_empty() {
                Err(format!("`{kind}:` needs a name"))
            } else {
                Ok(name.to_owned())
            }
        };
        match text.split_once(':') {
            None if text == "ip" => Ok(Self::Ip),
            None if text == "route" => Ok(Self::Route),
            Some(("header", name)) => {
                let name = named("header", name)?.to_ascii_lowercase();
                http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("`{name}` is not a header name"))?;
                Ok(Self::Header(name))
            }
            Some(("cookie", name)) => named("cookie", name).map(Self::Cookie),
            Some(("claim", name)) => named("claim", name).map(Self::Claim),
            _ => Err(format!(
                "`{text}` is not a key: use `ip`, `route`, `header:NAME`, `cookie:NAME` or \
                 `claim:NAME`"
            )),
        }
    }
}

/// Checks `rate_limits.NAME`.
pub(super) fn validate(
    name: &str,
    policy: &RateLimitConfig,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at = |field: &str, message: String| {
        Err(ConfigError::at(file, format!("rate_limits.{name}.{field}"), message))
    };
    if policy.requests == 0 {
        return at("requests", "must be at least 1".into());
    }
    if policy.per.is_zero() {
        return at("per", "must be longer than zero".into());
    }
    if policy.burst == Some(0) {
        return at("burst", "must be at least 1".into());
    }
    if policy.key.is_empty() {
        return at("key", "needs at least one part".into());
    }
    for part in &policy.key {
        if let Err(message) = KeyPart::parse(part) {
            return at("key", message);
        }
    }
    let shared_only = [
        ("kv", policy.kv.is_some()),
        ("url", policy.url.is_some()),
        ("url_env", policy.url_env.is_some()),
        ("timeout", policy.timeout.is_some()),
        ("key_prefix", policy.key_prefix.is_some()),
        ("on_error", policy.on_error != OnError::default()),
    ];
    if policy.scope == Scope::Local {
        return match shared_only.iter().find(|(_, set)| *set) {
            Some((field, _)) => at(field, "is only for scope = \"shared\"".into()),
            None => Ok(()),
        };
    }
    let sources = [&policy.kv, &policy.url, &policy.url_env].iter().filter(|s| s.is_some()).count();
    if sources != 1 {
        return at(
            "scope",
            "scope = \"shared\" needs exactly one of `kv`, `url` and `url_env`: where Redis is"
                .into(),
        );
    }
    if let Some(kv) = &policy.kv {
        match config.kv.get(kv) {
            None => return at("kv", format!("no `[kv.{kv}]` is configured")),
            Some(namespace) if namespace.backend != KvBackend::Redis => {
                return at("kv", format!("`[kv.{kv}]` is not in Redis (backend = \"redis\")"));
            }
            Some(_) => {}
        }
    }
    if policy.timeout.is_some_and(|t| t.is_zero()) {
        return at("timeout", "must be longer than zero".into());
    }
    Ok(())
}

/// Checks the policies `routes[i]` names (`names`): each is configured, named once, and keys on
/// a claim only if the route verifies a token (`verifies`).
pub(super) fn validate_route(
    i: usize,
    names: &[String],
    verifies: bool,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at =
        |message: String| Err(ConfigError::at(file, format!("routes[{i}].rate_limits"), message));
    for (n, name) in names.iter().enumerate() {
        let Some(policy) = config.rate_limits.get(name) else {
            return at(format!("no `[rate_limits.{name}]` is configured"));
        };
        if names[..n].contains(name) {
            return at(format!("`{name}` is named twice"));
        }
        let claim = policy.key.iter().find(|part| part.starts_with("claim:"));
        if let Some(claim) = claim
            && !verifies
        {
            return at(format!(
                "`{name}` counts by `{claim}`, which only a route with `[routes.identity]` \
                 has: an unverified token is never a key"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_parse_and_bad_ones_say_what_is_allowed() {
        assert_eq!(KeyPart::parse("ip"), Ok(KeyPart::Ip));
        assert_eq!(KeyPart::parse("route"), Ok(KeyPart::Route));
        assert_eq!(KeyPart::parse("header:X-Api-Key"), Ok(KeyPart::Header("x-api-key".into())));
        assert_eq!(KeyPart::parse("cookie:session"), Ok(KeyPart::Cookie("session".into())));
        assert_eq!(KeyPart::parse("claim:sub"), Ok(KeyPart::Claim("sub".into())));
        assert!(KeyPart::parse("header:").unwrap_err().contains("needs a name"));
        assert!(KeyPart::parse("header:a b").unwrap_err().contains("not a header name"));
        assert!(KeyPart::parse("user").unwrap_err().contains("`claim:NAME`"));
    }
}
