//! What a request names, and where it goes: its host (`authority`) and normalized path
//! ([`path`]) matched to a route ([`router`]); a split route's choice of target (`split`),
//! from the bearer token's verified claims (`claims`); the shadow copy and its compare
//! (`shadow`); a route's `identity`, the bearer token verified before anything serves it;
//! its rate limits (`rate_limit`), counted in this process (`rate_local`) or in Redis
//! (`rate_shared`), and what they count a request by (`rate_key`).

pub(crate) mod authority;
pub(crate) mod claims;
pub mod host_pattern;
pub(crate) mod identity;
pub(crate) mod ownership;
pub mod path;
pub(crate) mod rate_key;
pub(crate) mod rate_limit;
pub(crate) mod rate_local;
pub(crate) mod rate_shared;
pub mod router;
pub(crate) mod shadow;
pub(crate) mod split;

/// Cookie `name`'s value, from the first `Cookie` header that has it.
pub(crate) fn cookie<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (n, value) = pair.trim().split_once('=')?;
            (n == name).then_some(value)
        })
}
