//! Who put a worker or a route in the configuration (the file, the admin token, a tenant), and
//! the names the admin API accepts for workers and tenants.

use std::path::{Path, PathBuf};

/// Who put a worker or a route in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// The configuration file.
    File,
    /// The admin API, with the admin token.
    Admin,
    /// The admin API, for this tenant (with its token, or the admin's on its behalf).
    Tenant(String),
}

impl Owner {
    /// The name a worker of this owner is served under: its own, or `TENANT/NAME`.
    pub(crate) fn qualified(&self, name: &str) -> String {
        match self {
            Self::Tenant(tenant) => format!("{tenant}/{name}"),
            Self::File | Self::Admin => name.to_owned(),
        }
    }

    /// The tenant, if a tenant owns it.
    pub(crate) fn tenant(&self) -> Option<&str> {
        match self {
            Self::Tenant(tenant) => Some(tenant),
            Self::File | Self::Admin => None,
        }
    }

    /// The folder of `dir` that holds this owner's deployed workers.
    pub(crate) fn folder(&self, dir: &Path) -> PathBuf {
        match self {
            Self::Tenant(tenant) => dir.join(tenant),
            Self::File | Self::Admin => dir.to_owned(),
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File => f.write_str("the configuration file"),
            Self::Admin => f.write_str("the admin token"),
            Self::Tenant(tenant) => write!(f, "tenant `{tenant}`"),
        }
    }
}

/// A name the API accepts for a worker or a tenant: it names a file or a folder too.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}
