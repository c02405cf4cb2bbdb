//! A route's `identity`: the bearer token verified in the host before anything serves the
//! request (a worker, a component, a split, an upstream with no worker at all, or a fixed
//! answer), and the claims the route names passed on as request headers.
//!
//! ```text
//!  client's x-jwt-sub, … ─▶ removed, always
//!  Authorization: Bearer ─▶ ClaimSource::check ─┬▶ verified: each named claim ─▶ its header
//!                            (the keys, policy)  ├▶ no token: 401 missing_token, WWW-Authenticate: Bearer
//!                                                ├▶ refused: 401 invalid_token, … error="invalid_token"
//!                                                └▶ keys unavailable: 503 keys_unavailable
//! ```
//!
//! The check is the one a split's claim rules make, with the SDK's own `verify` over the key
//! set a worker's `jws_verify` reads: a route admits exactly the tokens its worker would.

use std::borrow::Cow;
use std::collections::BTreeMap;

use edgegate_sdk::json::Value;
use edgegate_sdk::jwt::{self, Jwt};
use http::{HeaderMap, HeaderName, HeaderValue};

use super::claims::{ClaimSource, claim_text};
use crate::error::{ErrorKind, RequestError};

/// A route's identity check.
#[derive(Debug)]
pub(crate) struct Identity {
    source: ClaimSource,
    /// Claim name and the header it is passed as.
    claims: Vec<(String, HeaderName)>,
}

impl Identity {
    /// Verifies with `source` and passes `claims` (claim name to header name, checked by
    /// validation) on.
    pub(crate) fn new(source: ClaimSource, claims: &BTreeMap<String, String>) -> Self {
        let claims = claims
            .iter()
            .filter_map(|(claim, header)| {
                Some((claim.clone(), HeaderName::from_bytes(header.as_bytes()).ok()?))
            })
            .collect();
        Self { source, claims }
    }

    /// Admits a request whose bearer token verifies, its claims set as headers in place of
    /// any the client sent, and returns the token (a rate limit may count by its claims);
    /// refuses any other.
    pub(crate) fn admit(&self, headers: &mut HeaderMap) -> Result<Jwt, RequestError> {
        for (_, header) in &self.claims {
            headers.remove(header);
        }
        let token = self.source.check(headers).map_err(refusal)?;
        for (claim, header) in &self.claims {
            let Some(text) = header_text(&token, claim) else { continue };
            let value = HeaderValue::from_str(&text).map_err(|_| {
                RequestError::new(
                    ErrorKind::InvalidToken,
                    format!("claim `{claim}` is not a valid value for header {header}"),
                )
            })?;
            headers.insert(header.clone(), value);
        }
        Ok(token)
    }
}

/// Claim `claim` as a header value, as auth-router's `claim_headers` writes it: a string as
/// it is, an array's strings joined with `,`, a number or a boolean as signed.
fn header_text<'j>(token: &'j Jwt, claim: &str) -> Option<Cow<'j, str>> {
    match token.claims().get(claim)? {
        value @ Value::Array(_) => {
            let strings: Vec<String> = value.strings().map(|s| s.chars().collect()).collect();
            Some(Cow::Owned(strings.join(",")))
        }
        _ => claim_text(token, claim),
    }
}

/// The answer to a token that does not verify; the reason goes to the log.
fn refusal(error: jwt::Error) -> RequestError {
    let kind = match error {
        jwt::Error::MissingToken => ErrorKind::MissingToken,
        jwt::Error::KeysUnavailable => ErrorKind::KeysUnavailable,
        _ => ErrorKind::InvalidToken,
    };
    RequestError::new(kind, format!("the bearer token: {}", error.code()))
}
