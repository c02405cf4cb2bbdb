//! `[routes.identity]`: a route whose requests must carry a bearer token the gateway verifies
//! before anything serves them, and whose verified claims reach the target as headers. How
//! it is checked is in crate::route::identity.

use std::collections::BTreeMap;

use http::header::{self, HeaderName};
use serde::Deserialize;

use super::jwt::JwtConfig;
use super::{Config, ConfigError};
use crate::forward::headers::HOP_BY_HOP;

/// `[routes.identity]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    /// Verify with the keys and the policy of this worker's `[workers.NAME.jwt]`. One of
    /// `worker` and `jwt`.
    pub worker: Option<String>,
    /// Verify with these keys and this policy (`[routes.identity.jwt]`, the same table as a
    /// worker's).
    pub jwt: Option<JwtConfig>,
    /// Claims passed to the target as request headers, by claim name:
    /// `claims = { sub = "x-jwt-sub" }`. A client's own copies of these headers are always
    /// removed; a claim the token lacks leaves its header absent.
    #[serde(default)]
    pub claims: BTreeMap<String, String>,
}

/// Headers a claim may not be passed as, besides the hop-by-hop ones a proxy drops anyway
/// ([`HOP_BY_HOP`]): the request's framing, its host, and its credentials.
const RESERVED: [HeaderName; 6] = [
    header::HOST,
    header::CONTENT_LENGTH,
    header::CONTENT_TYPE,
    header::AUTHORIZATION,
    header::COOKIE,
    header::EXPECT,
];

/// Checks `routes[i].identity`.
pub(super) fn validate(
    i: usize,
    identity: &IdentityConfig,
    config: &Config,
    file: &str,
) -> Result<(), ConfigError> {
    let at = |field: &str, message: String| {
        Err(ConfigError::at(file, format!("routes[{i}].identity{field}"), message))
    };
    match (&identity.worker, &identity.jwt) {
        (Some(worker), None) => match config.workers.get(worker) {
            None => return at(".worker", format!("no worker named `{worker}` in [workers]")),
            Some(w) if w.jwt.is_none() => {
                return at(".worker", format!("worker `{worker}` has no [workers.{worker}.jwt]"));
            }
            Some(_) => {}
        },
        (None, Some(jwt)) => super::jwt::validate(jwt, &format!("routes[{i}].identity.jwt"), file)?,
        _ => {
            return at(
                "",
                "needs exactly one of `worker` (whose [workers.NAME.jwt] verifies the token) \
                 and a `jwt` table"
                    .into(),
            );
        }
    }
    let mut headers: Vec<HeaderName> = Vec::new();
    for (claim, header) in &identity.claims {
        let field = format!(".claims.{claim}");
        if claim.is_empty() {
            return at(".claims", "a claim name cannot be empty".into());
        }
        // Parsed, a name is lower case: `X-Id` and `x-id` are one header.
        let Ok(name) = HeaderName::from_bytes(header.as_bytes()) else {
            return at(&field, format!("`{header}` is not a header name"));
        };
        if RESERVED.contains(&name) || HOP_BY_HOP.contains(&name) {
            return at(&field, format!("`{header}` is a header the gateway will not set"));
        }
        if headers.contains(&name) {
            return at(&field, format!("`{header}` is named for two claims"));
        }
        headers.push(name);
    }
    Ok(())
}
