//! `[routes.split]`: a route whose requests go to one of several targets (workers or
//! upstreams), by rules first and then by weight, sticky on a key. How a target is chosen is
//! in crate::route::split.

use std::time::Duration;

use serde::Deserialize;

use super::{Config, ConfigError};
use edgegate_runtime::ByteSize;

/// `[routes.split]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitConfig {
    /// The targets, in order: the weighted split gives each its share of the buckets in this
    /// order, so raising a later target's weight moves users only toward it.
    pub targets: Vec<SplitTargetConfig>,
    /// Rules tried in order before the weights: the first that matches picks its target.
    #[serde(default)]
    pub rules: Vec<SplitRuleConfig>,
    /// What keeps a user on one side: a cookie or a header. Without one, or when the request
    /// lacks it, the split is random per request.
    pub sticky: Option<StickyConfig>,
    /// Mixed into the hash with the key, so two routes split the same users differently.
    /// Default: the route's name.
    pub salt: Option<String>,
    /// A target to try a request again on when a worker fails it (a trap, a limit, an error
    /// of the runtime) before answering: GET, HEAD, OPTIONS, PUT, DELETE and TRACE only.
    pub fallback: Option<String>,
    /// Send a copy of each request served by another target to this one, and compare.
    pub shadow: Option<ShadowConfig>,
    /// The worker whose `[workers.NAME.jwt]` (keys and policy) verifies the bearer token
    /// that `claim` rules and a `claim` sticky key read. Required when they are used.
    pub jwt: Option<String>,
}

/// `[routes.split.shadow]`: copies of requests, sent to a target after the primary answered,
/// their answers compared with the primary's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowConfig {
    /// The target the copies go to; requests it serves itself are not shadowed.
    pub target: String,
    /// The methods shadowed. Default `["GET", "HEAD"]`: a copy of a write would write twice.
    #[serde(default = "ShadowConfig::default_methods")]
    pub methods: Vec<String>,
    /// A request body over this is not shadowed (counted `skipped`). Default 64KiB.
    #[serde(default = "ShadowConfig::default_max_body")]
    pub max_body: ByteSize,
    /// How long a shadow may take, to the end of its body; past it, `shadow_error`.
    /// Default 2s.
    #[serde(default = "ShadowConfig::default_timeout", deserialize_with = "super::duration")]
    pub timeout: Duration,
    /// Shadows in flight at once at most; past it, `skipped`. Default 16.
    #[serde(default = "ShadowConfig::default_concurrency")]
    pub concurrency: usize,
    /// The response headers compared, besides the status and the body. Default
    /// `["content-type"]`.
    #[serde(default = "ShadowConfig::default_compare_headers")]
    pub compare_headers: Vec<String>,
}

impl ShadowConfig {
    fn default_methods() -> Vec<String> {
        vec!["GET".into(), "HEAD".into()]
    }

    fn default_max_body() -> ByteSize {
        ByteSize(64 << 10)
    }

    fn default_timeout() -> Duration {
        Duration::from_secs(2)
    }

    fn default_concurrency() -> usize {
        16
    }

    fn default_compare_headers() -> Vec<String> {
        vec!["content-type".into()]
    }
}

/// One target of a split.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitTargetConfig {
    /// Its name in rules, metrics, logs and the override header.
    pub name: String,
    /// The worker that serves it. One of `worker` and `upstream`.
    pub worker: Option<String>,
    /// The upstream it proxies to.
    pub upstream: Option<String>,
    /// Its share of the weighted split, relative to the others'; 0 takes only what rules
    /// and the override send. Default 0.
    #[serde(default)]
    pub weight: u32,
}

/// A rule: where the request matches, which target it goes to. Exactly one of `header`,
/// `cookie`, `query`, `claim` and `user_agent`; `user_agent` matches a substring, or a
/// regular expression with `regex = true`; the others match `value` exactly or `prefix`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitRuleConfig {
    /// A request header's name.
    pub header: Option<String>,
    /// A cookie's name.
    pub cookie: Option<String>,
    /// A query parameter's name.
    pub query: Option<String>,
    /// A claim of the verified bearer token (see [`SplitConfig::jwt`]): a string, any
    /// string of an array, or a number's or boolean's JSON text. A token that does not
    /// verify matches no claim rule.
    pub claim: Option<String>,
    /// A substring of the `User-Agent` (or a regular expression, with `regex`).
    pub user_agent: Option<String>,
    /// `user_agent` is a regular expression.
    #[serde(default)]
    pub regex: bool,
    /// The exact value the header, cookie or parameter must have.
    pub value: Option<String>,
    /// A prefix of the value instead.
    pub prefix: Option<String>,
    /// The target it sends to.
    pub target: String,
}

/// The sticky key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StickyConfig {
    /// A cookie's value.
    pub cookie: Option<String>,
    /// A request header's value.
    pub header: Option<String>,
    /// A claim of the verified bearer token (see [`SplitConfig::jwt`]), such as `sub`.
    pub claim: Option<String>,
}

/// Checks `routes[i].split`.
pub(super) fn validate(
    i: usize,
    split: &SplitConfig,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at = |field: String, message: String| {
        Err(ConfigError::at(file, format!("routes[{i}].split.{field}"), message))
    };
    if split.targets.is_empty() {
        return at("targets".into(), "must name at least one target".into());
    }
    for (t, target) in split.targets.iter().enumerate() {
        let key = |field: &str| format!("targets[{t}].{field}");
        if split.targets[..t].iter().any(|other| other.name == target.name) {
            return at(key("name"), format!("`{}` is named twice", target.name));
        }
        match (&target.worker, &target.upstream) {
            (Some(worker), None) if !config.workers.contains_key(worker) => {
                return at(key("worker"), format!("no worker named `{worker}` in [workers]"));
            }
            (None, Some(upstream)) if !config.upstreams.contains_key(upstream) => {
                return at(
                    key("upstream"),
                    format!("no upstream named `{upstream}` in [upstreams]"),
                );
            }
            (Some(_), None) | (None, Some(_)) => {}
            _ => {
                return at(
                    format!("targets[{t}]"),
                    "needs exactly one of `worker` and `upstream`".into(),
                );
            }
        }
    }
    if split.targets.iter().all(|t| t.weight == 0) {
        return at("targets".into(), "at least one target needs a weight above 0".into());
    }
    for (r, rule) in split.rules.iter().enumerate() {
        let key = |field: &str| format!("rules[{r}].{field}");
        if !split.targets.iter().any(|t| t.name == rule.target) {
            return at(key("target"), format!("no target named `{}`", rule.target));
        }
        let on = [&rule.header, &rule.cookie, &rule.query, &rule.claim, &rule.user_agent];
        if on.iter().filter(|o| o.is_some()).count() != 1 {
            return at(
                format!("rules[{r}]"),
                "needs exactly one of `header`, `cookie`, `query`, `claim` and `user_agent`".into(),
            );
        }
        match &rule.user_agent {
            Some(pattern) => {
                if rule.value.is_some() || rule.prefix.is_some() {
                    return at(
                        format!("rules[{r}]"),
                        "a `user_agent` rule takes no `value` or `prefix`".into(),
                    );
                }
                if rule.regex
                    && let Err(e) = regex::Regex::new(pattern)
                {
                    return at(key("user_agent"), format!("not a regular expression: {e}"));
                }
            }
            None => {
                if rule.value.is_some() == rule.prefix.is_some() {
                    return at(
                        format!("rules[{r}]"),
                        "needs exactly one of `value` and `prefix`".into(),
                    );
                }
                if rule.regex {
                    return at(key("regex"), "applies to `user_agent` rules only".into());
                }
                if let Some(bad) = rule.header.as_deref().filter(|h| !is_header_name(h)) {
                    return at(key("header"), format!("`{bad}` is not a header name"));
                }
            }
        }
    }
    if let Some(fallback) = &split.fallback
        && !split.targets.iter().any(|t| &t.name == fallback)
    {
        return at("fallback".into(), format!("no target named `{fallback}`"));
    }
    if let Some(shadow) = &split.shadow {
        if !split.targets.iter().any(|t| t.name == shadow.target) {
            return at("shadow.target".into(), format!("no target named `{}`", shadow.target));
        }
        if let Some(bad) =
            shadow.methods.iter().find(|m| http::Method::from_bytes(m.as_bytes()).is_err())
        {
            return at("shadow.methods".into(), format!("`{bad}` is not a method"));
        }
        if let Some(bad) = shadow.compare_headers.iter().find(|h| !is_header_name(h)) {
            return at("shadow.compare_headers".into(), format!("`{bad}` is not a header name"));
        }
        if shadow.concurrency == 0 {
            return at("shadow.concurrency".into(), "must be at least 1".into());
        }
        if shadow.timeout.is_zero() {
            return at("shadow.timeout".into(), "must be longer than zero".into());
        }
    }
    if let Some(sticky) = &split.sticky {
        let on = [&sticky.cookie, &sticky.header, &sticky.claim];
        if on.iter().filter(|o| o.is_some()).count() != 1 {
            return at(
                "sticky".into(),
                "needs exactly one of `cookie`, `header` and `claim`".into(),
            );
        }
        if let Some(bad) = sticky.header.as_deref().filter(|h| !is_header_name(h)) {
            return at("sticky.header".into(), format!("`{bad}` is not a header name"));
        }
    }
    let reads_claims = split.rules.iter().any(|r| r.claim.is_some())
        || split.sticky.as_ref().is_some_and(|s| s.claim.is_some());
    match &split.jwt {
        None if reads_claims => at(
            "jwt".into(),
            "claim rules and a claim sticky key need `jwt`: the worker whose \
             [workers.NAME.jwt] verifies the token"
                .into(),
        ),
        Some(_) if !reads_claims => {
            at("jwt".into(), "no rule or sticky key reads a claim: remove it".into())
        }
        Some(worker) => match config.workers.get(worker) {
            None => at("jwt".into(), format!("no worker named `{worker}` in [workers]")),
            Some(w) if w.jwt.is_none() => {
                at("jwt".into(), format!("worker `{worker}` has no [workers.{worker}.jwt]"))
            }
            Some(_) => Ok(()),
        },
        None => Ok(()),
    }
}

fn is_header_name(name: &str) -> bool {
    http::HeaderName::from_bytes(name.as_bytes()).is_ok()
}
