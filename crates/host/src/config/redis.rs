//! Key spaces in Redis: every KV namespace in Redis (`[kv.NAME]`, `backend = "redis"`) and
//! every shared rate-limit policy (`[rate_limits.NAME]`, `scope = "shared"`) writes under a
//! key prefix of its own, and no prefix may be a prefix of another's, so that nothing one of
//! them writes can be read, reset or overwritten through another:
//!
//! ```text
//!  edgegate:kv:users:…          [kv.users]
//!  edgegate:kv:users:x:…        [kv."users:x"]      refused: starts with edgegate:kv:users:
//!  edgegate:rate:per-ip:…       [rate_limits.per-ip]
//! ```
//!
//! The defaults differ by kind (`kv`, `rate`), so a namespace named `rate` cannot reach the
//! rate limits' counts; a name with a `:` that would reach into another's space, and an
//! explicit `key_prefix` that would, are refused at load. Prefixes are compared across every
//! Redis the configuration names, as if they were one server: two `url`s may be one server.

use super::{Config, ConfigError, KvBackend, KvConfig, RateLimitConfig, Scope};

/// `[kv.NAME]`'s prefix in Redis: its `key_prefix`, else `edgegate:kv:NAME:`.
pub(crate) fn kv_prefix(name: &str, kv: &KvConfig) -> String {
    kv.key_prefix.clone().unwrap_or_else(|| format!("edgegate:kv:{name}:"))
}

/// `[rate_limits.NAME]`'s prefix in Redis: its `key_prefix`, else `edgegate:rate:NAME:`.
pub(crate) fn rate_prefix(name: &str, policy: &RateLimitConfig) -> String {
    policy.key_prefix.clone().unwrap_or_else(|| format!("edgegate:rate:{name}:"))
}

/// Refuses two key spaces in Redis one of which contains the other.
pub(super) fn validate(config: &Config, file: &str) -> Result<(), ConfigError> {
    let kv = config
        .kv
        .iter()
        .filter(|(_, kv)| kv.backend == KvBackend::Redis)
        .map(|(name, kv)| (kv_prefix(name, kv), format!("kv.{name}")));
    let rate = config
        .rate_limits
        .iter()
        .filter(|(_, policy)| policy.scope == Scope::Shared)
        .map(|(name, policy)| (rate_prefix(name, policy), format!("rate_limits.{name}")));
    let mut spaces: Vec<(String, String)> = kv.chain(rate).collect();
    // Sorted, a prefix comes before every key that starts with it, and so does each key
    // between the two: comparing neighbours finds every clash.
    spaces.sort();
    for pair in spaces.windows(2) {
        let ((outer, outer_key), (inner, inner_key)) = (&pair[0], &pair[1]);
        if inner.starts_with(outer.as_str()) {
            return Err(ConfigError::at(
                file,
                inner_key.as_str(),
                format!(
                    "its keys in Redis (`{inner}…`) would lie inside {outer_key}'s (`{outer}…`): \
                     one could read and overwrite the other's; rename it or set a `key_prefix` \
                     that neither starts with the other"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::Loaded;

    fn refused(text: &str) -> Option<String> {
        Loaded::from_text(text, "t.toml", PathBuf::new()).err().map(|e| e.to_string())
    }

    const SHARED: &str = "[kv.counts]\nbackend = \"redis\"\nurl = \"redis://r\"\n\
        [rate_limits.per-ip]\nrequests = 1\nscope = \"shared\"\nkv = \"counts\"\n";

    #[test]
    fn a_namespace_named_rate_cannot_reach_the_rate_limits_counts() {
        assert_eq!(refused(SHARED), None);
        let rate = format!("{SHARED}[kv.rate]\nbackend = \"redis\"\nurl = \"redis://r\"\n");
        assert_eq!(refused(&rate), None, "edgegate:kv:rate: is not edgegate:rate:");
        assert_eq!(super::kv_prefix("rate", &toml::from_str("").unwrap()), "edgegate:kv:rate:");
    }

    #[test]
    fn a_space_inside_another_is_refused_naming_both() {
        let colon =
            format!("{SHARED}[kv.\"counts:x\"]\nbackend = \"redis\"\nurl = \"redis://o\"\n");
        let e = refused(&colon).expect("a name with `:` reaching into another's space");
        assert!(e.contains("kv.counts:x") && e.contains("inside kv.counts's"), "{e}");
        let forged = format!(
            "{SHARED}[kv.forged]\nbackend = \"redis\"\nurl = \"redis://r\"\n\
             key_prefix = \"edgegate:rate:per-ip:9:\"\n"
        );
        let e = refused(&forged).expect("a key_prefix inside a policy's space");
        assert!(e.contains("kv.forged") && e.contains("rate_limits.per-ip"), "{e}");
        let wide = format!(
            "{SHARED}[kv.wide]\nbackend = \"redis\"\nurl = \"redis://r\"\nkey_prefix = \"edgegate:\"\n"
        );
        assert!(refused(&wide).is_some(), "a prefix around every other");
        let same = format!(
            "{SHARED}[kv.twin]\nbackend = \"redis\"\nurl = \"redis://r\"\nkey_prefix = \"edgegate:kv:counts:\"\n"
        );
        assert!(refused(&same).is_some(), "the same space twice");
        // Memory and redb namespaces are not in Redis: any name.
        assert_eq!(refused(&format!("{SHARED}[kv.\"counts:y\"]\n")), None);
    }
}
