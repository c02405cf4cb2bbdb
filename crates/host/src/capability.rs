//! What the host holds for workers and grants each one: KV namespaces ([`kv`]), JWT keys
//! ([`keyring`]) and outbound fetch ([`fetch`]) to the origins it allows ([`origin`]), each
//! connection within the reach its grant gives ([`reach`]).

pub(crate) mod fetch;
pub(crate) mod keyring;
pub(crate) mod kv;
pub(crate) mod origin;
pub(crate) mod reach;
