//! Workers' code: where its bytes come from ([`source`]), what they compile to ([`compiled`]),
//! the on-disk cache of compiled modules and its pruning ([`module_cache`], [`prune`]), the
//! code linked to its ABI's entry ([`entry`]), what makes it ([`loader`]), and the code kept in
//! memory ([`resident`]).

pub(crate) mod compiled;
pub(crate) mod entry;
pub(crate) mod loader;
pub(crate) mod module_cache;
pub(crate) mod prune;
pub(crate) mod resident;
pub(crate) mod source;

/// A module's sha256.
pub(crate) type Digest = [u8; 32];
