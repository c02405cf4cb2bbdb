//! `GET /tenants/NAME/usage`: a tenant's usage counters (crate::observe::usage) as JSON, for
//! billing: to the admin token for any tenant, to a tenant's token for its own.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;

use super::answer::json;
use super::principal::Principal;
use crate::gateway::Gateway;

/// Answers a request under `/tenants/`.
pub(crate) fn serve<B>(request: &Request<B>, gateway: &Gateway) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let Some(tenant) = path.strip_prefix("/tenants/").and_then(|p| p.strip_suffix("/usage")) else {
        return json(StatusCode::NOT_FOUND, r#"{"error":"no_route"}"#.into());
    };
    if request.method() != Method::GET {
        return json(StatusCode::METHOD_NOT_ALLOWED, r#"{"error":"method_not_allowed"}"#.into());
    }
    let allowed = match Principal::of(request, gateway) {
        Some(Principal::Admin) => true,
        Some(Principal::Tenant(own)) => own == tenant,
        None => return super::workers::unauthorized(true),
    };
    match gateway.tenant_usage(tenant).filter(|_| allowed) {
        Some(report) => {
            let mut body = serde_json::json!({ "tenant": tenant });
            if let (Some(body), Ok(serde_json::Value::Object(counters))) =
                (body.as_object_mut(), serde_json::to_value(report))
            {
                body.extend(counters);
            }
            json(StatusCode::OK, body.to_string())
        }
        None => json(StatusCode::NOT_FOUND, r#"{"error":"no_such_tenant"}"#.into()),
    }
}
