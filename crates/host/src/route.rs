//! What a request names, and where it goes: its host (`authority`) and normalized path
//! ([`path`]) matched to a route ([`router`]); a split route's choice of target (`split`),
//! from the bearer token's verified claims (`claims`); the shadow copy and its compare
//! (`shadow`); a route's `identity`, the bearer token verified before anything serves it.

pub(crate) mod authority;
pub(crate) mod claims;
pub(crate) mod identity;
pub mod path;
pub(crate) mod rate_key;
pub(crate) mod rate_limit;
pub mod router;
pub(crate) mod shadow;
pub(crate) mod split;
