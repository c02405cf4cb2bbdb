//! What the host holds for workers and lends them: JWS keys ([`keys`]) and whole tokens checked
//! with them ([`token`]), the outbound requests the gateway implements ([`fetch`]), and the
//! image capability's policy and threads ([`image`]).

pub mod fetch;
pub(crate) mod image;
pub mod keys;
pub mod token;
