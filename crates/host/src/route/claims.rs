//! A request's bearer token verified in the host, with the keys and the policy of a worker's
//! `[workers.W.jwt]` (or a route's own table): a split's view of it, so that rules and the
//! sticky key can read its claims, and the check a route's `identity` makes
//! ([`identity`](super::identity)).
//!
//! ```text
//!  Authorization: Bearer h.p.s ─▶ edgegate_sdk::jwt::verify ─▶ claims ─▶ claim rules, sticky key
//!                                  (the worker's [workers.W.jwt]:       (a token that does not
//!                                   its KeySet, issuer, audiences,       verify has no claims:
//!                                   leeway, required claims, size cap)   no rule matches it)
//! ```
//!
//! The check is the runtime's `token::verify`: the SDK's own `verify`, compiled natively, over
//! the same key set the worker's `jws_verify` and `jwt_claims` read. A token routes by its
//! claims exactly when the worker would accept it. A forged or expired token cannot choose a target. The token is verified at most
//! once per request, and only when a rule or the sticky key asks for a claim.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::time::SystemTime;

use edgegate_runtime::Keys;
use edgegate_sdk::json::{JsonStr, Value};
use edgegate_sdk::jwt::{self, Jwt, Validation};
use http::HeaderMap;

use crate::config::JwtConfig;
use crate::observe::metrics::{CountsBy, LabelValue};

/// What became of a request's token at a split, for `edgegate_split_claims_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Verified,
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token the worker would refuse (401).
    Invalid,
    /// Keys unavailable right now (a JWKS URL down past its staleness).
    Unavailable,
}

impl LabelValue for Outcome {
    const LABEL: &'static str = "outcome";
    const ALL: &'static [Self] = &[Self::Verified, Self::Missing, Self::Invalid, Self::Unavailable];

    fn value(self) -> &'static str {
        match self {
            Self::Verified => "verified",
            Self::Missing => "missing",
            Self::Invalid => "invalid",
            Self::Unavailable => "unavailable",
        }
    }
}

/// The keys and policy a split verifies tokens with: a worker's.
#[derive(Debug)]
pub(crate) struct ClaimSource {
    keys: Keys,
    validation: Validation,
    outcomes: CountsBy<Outcome>,
}

impl ClaimSource {
    /// Verifies with `keys` under `policy` (a `[workers.W.jwt]` or a route's own table),
    /// counting outcomes in `metric` (`edgegate_split_claims_total`,
    /// `edgegate_route_identity_total`) for `route`.
    pub(crate) fn new(keys: Keys, policy: &JwtConfig, metric: &'static str, route: &str) -> Self {
        let validation = Validation {
            issuer: policy.issuer.clone(),
            audiences: policy.audiences.clone(),
            leeway: i64::try_from(policy.leeway.as_secs()).unwrap_or(i64::MAX),
            required: policy.required_claims.clone(),
            max_token_len: policy.max_token_bytes.bytes() as usize,
        };
        let outcomes = CountsBy::new(metric, &[("route", route.to_owned())]);
        Self { keys, validation, outcomes }
    }

    /// The request's token, verified, or why it is refused; counted either way.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<Jwt, jwt::Error> {
        let verified = edgegate_runtime::token::verify(
            headers,
            &self.keys,
            &self.validation,
            SystemTime::now(),
        );
        let outcome = match &verified {
            Ok(_) => Outcome::Verified,
            Err(jwt::Error::MissingToken) => Outcome::Missing,
            Err(jwt::Error::KeysUnavailable) => Outcome::Unavailable,
            Err(error) => {
                tracing::debug!(error = error.code(), "the bearer token does not verify");
                Outcome::Invalid
            }
        };
        self.outcomes.increment(outcome);
        verified
    }
}

/// One request's claims, verified on first use.
pub(crate) struct Claims<'a> {
    source: Option<&'a ClaimSource>,
    headers: &'a HeaderMap,
    jwt: OnceCell<Option<Jwt>>,
}

impl<'a> Claims<'a> {
    /// The claims of the token in `headers`, verified by `source` when first read; none
    /// without a source.
    pub(crate) fn new(source: Option<&'a ClaimSource>, headers: &'a HeaderMap) -> Self {
        Self { source, headers, jwt: OnceCell::new() }
    }

    fn jwt(&self) -> Option<&Jwt> {
        self.jwt.get_or_init(|| self.source?.check(self.headers).ok()).as_ref()
    }

    /// The values of claim `name` a rule compares: a string's text, each string of an
    /// array, a number's or a boolean's JSON text. None when the token did not verify.
    pub(crate) fn values(&self, name: &str) -> Vec<Cow<'_, str>> {
        let Some(value) = self.jwt().and_then(|jwt| jwt.claims().get(name)) else {
            return Vec::new();
        };
        match value {
            Value::Number(_) | Value::Bool(_) => vec![Cow::Borrowed(value.raw())],
            _ => value.strings().map(text).collect(),
        }
    }

    /// The sticky key claim `name` gives: a string's text, or any other value's JSON text as
    /// signed. None when the token did not verify or lacks the claim.
    pub(crate) fn key(&self, name: &str) -> Option<Cow<'_, str>> {
        claim_text(self.jwt()?, name)
    }
}

/// Claim `name` of a verified token as text: a string's (escapes decoded), or any other
/// value's JSON text as signed. None when the token lacks it.
pub(crate) fn claim_text<'j>(jwt: &'j Jwt, name: &str) -> Option<Cow<'j, str>> {
    let value = jwt.claims().get(name)?;
    Some(value.as_json_str().map_or(Cow::Borrowed(value.raw()), text))
}

/// A JSON string's text: borrowed, unless it has escapes to decode.
fn text(s: JsonStr<'_>) -> Cow<'_, str> {
    s.as_str().map_or_else(|| Cow::Owned(s.chars().collect()), Cow::Borrowed)
}
