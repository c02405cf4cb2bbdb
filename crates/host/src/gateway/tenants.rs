//! The tenants a snapshot serves (`[tenants.NAME]`): who a deploy token belongs to (by its
//! sha256: the token itself is never kept), each tenant's share of the instance slots (one
//! for all its workers together), and its usage counters. A reload keeps a tenant's share
//! while its size is unchanged, with the requests that hold it, and its counters always.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::share::Share;
use crate::config::{ConfigError, Loaded};
use crate::observe::usage::TenantUsage;

/// One tenant at run time.
#[derive(Debug)]
pub(crate) struct Tenant {
    pub(crate) name: String,
    /// Its workers' share of the instance slots, all together.
    pub(crate) share: Share,
    /// Its usage counters, the same ones from one reload to the next.
    pub(crate) usage: Arc<TenantUsage>,
}

/// The tenants, by name and by their token's sha256.
#[derive(Debug, Default)]
pub(crate) struct Tenants {
    by_name: BTreeMap<String, Arc<Tenant>>,
    by_token: HashMap<[u8; 32], Arc<Tenant>>,
}

impl Tenants {
    /// The tenants of `loaded`, each token read and checked (a secret, not the admin token's
    /// and not another tenant's); `previous` gives the shares to keep.
    pub(crate) fn new(
        loaded: &Loaded,
        admin: Option<[u8; 32]>,
        previous: Option<&Tenants>,
    ) -> Result<Self, ConfigError> {
        let mut tenants = Self::default();
        for (name, config) in loaded.config.tenants.iter() {
            let token = config.token_hash(name, loaded)?;
            let clash =
                |message: String| ConfigError::at(&loaded.file, format!("tenants.{name}"), message);
            if admin == Some(token) {
                return Err(clash("its token is the admin token: give it one of its own".into()));
            }
            if let Some(other) = tenants.by_token.get(&token) {
                return Err(clash(format!("its token is tenant `{}`'s", other.name)));
            }
            let places = config.concurrency(&loaded.config);
            let kept = previous
                .and_then(|p| p.by_name.get(name))
                .filter(|t| t.share.places == places)
                .map(|t| t.share.clone());
            let share = kept.unwrap_or_else(|| Share {
                places,
                semaphore: Arc::new(tokio::sync::Semaphore::new(places as usize)),
            });
            let usage = previous.and_then(|p| p.by_name.get(name)).map(|t| t.usage.clone());
            let usage = usage.unwrap_or_else(|| Arc::new(TenantUsage::of(name)));
            let tenant = Arc::new(Tenant { name: name.clone(), share, usage });
            tenants.by_token.insert(token, tenant.clone());
            tenants.by_name.insert(name.clone(), tenant);
        }
        Ok(tenants)
    }

    /// Tenant `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Tenant>> {
        self.by_name.get(name)
    }

    /// The tenant whose token has this sha256.
    pub(crate) fn by_token(&self, sha256: &[u8; 32]) -> Option<&Arc<Tenant>> {
        self.by_token.get(sha256)
    }
}

impl super::Gateway {
    /// The tenant whose deploy token `token` is, if any.
    pub(crate) fn tenant_of_token(&self, token: &str) -> Option<String> {
        let sha256 = crate::config::token::sha256(token.as_bytes());
        self.current.load().tenants.by_token(&sha256).map(|t| t.name.clone())
    }

    /// Tenant `name`'s usage counters, if it is configured.
    pub(crate) fn tenant_usage(&self, name: &str) -> Option<crate::observe::usage::Report> {
        self.current.load().tenants.get(name).map(|t| t.usage.report())
    }

    /// Whether tenant `name` is configured.
    pub(crate) fn has_tenant(&self, name: &str) -> bool {
        self.current.load().tenants.get(name).is_some()
    }

    /// Whether any tenant is configured.
    pub(crate) fn has_tenants(&self) -> bool {
        !self.current.load().loaded.config.tenants.is_empty()
    }
}
