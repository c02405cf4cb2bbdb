//! Who a request to the admin listener is, by its bearer token: the operator (the admin
//! token, `EDGEGATE_ADMIN_TOKEN`), a tenant (its own token, matched by its sha256), or nobody.
//! A tenant's token opens its own workers and usage, nothing else: not `/reload`, not another
//! tenant's workers, not `/metrics` (which names every tenant).

use http::{Request, header};

use crate::gateway::Gateway;

/// Who asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Principal {
    /// The operator: the admin token, or anyone while none is set.
    Admin,
    /// A tenant, by its token.
    Tenant(String),
}

impl Principal {
    /// Who `request` is: `None` when it carries a token that is neither the admin token nor
    /// a tenant's, or carries none while the admin token is set.
    pub(crate) fn of<B>(request: &Request<B>, gateway: &Gateway) -> Option<Self> {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let token = &gateway.token;
        match bearer {
            Some(given) if token.is(given.as_bytes()) => Some(Self::Admin),
            Some(given) => gateway.tenant_of_token(given).map(Self::Tenant),
            None if !token.is_set() => Some(Self::Admin),
            None => None,
        }
    }

    /// `admin`, or `tenant:NAME`: who, in an audit line.
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Admin => "admin".into(),
            Self::Tenant(name) => format!("tenant:{name}"),
        }
    }
}
