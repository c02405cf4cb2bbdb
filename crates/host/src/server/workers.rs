//! The admin listener's workers (docs/deploy.md#the-workers-api):
//!
//! * `GET /workers`: every worker served (a tenant sees only its own), as JSON: its module's
//!   digest, its tenant, whether and when the API deployed it, whether its code is resident,
//!   its routes.
//! * `PUT /workers/NAME`: deploys a worker, from a `multipart/form-data` body with a `worker`
//!   part (TOML: a `[worker]` table as `[workers.NAME]` has it, and its `[[routes]]`) and a
//!   `module` part (binary Wasm), and answers as `POST /reload` does.
//! * `DELETE /workers/NAME`: removes a worker the API deployed.
//!
//! Changes need a token: the admin token (`EDGEGATE_ADMIN_TOKEN`, which must be set for it),
//! whose workers are its own, or a tenant's, whose workers are the tenant's (`/workers/NAME`
//! is `TENANT/NAME` to it). The admin token reaches a tenant's as `/workers/TENANT/NAME`.
//! Each change, done or refused, writes an audit line (crate::observe::audit).

use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

use super::answer::json;
use super::principal::Principal;
use crate::config::Owner;
use crate::gateway::{DeployError, DeployRequest, Gateway, ReloadError, Reloaded};
use crate::observe::audit::{self, Change};

/// Answers a request under `/workers`, from the admin connection of `peer`.
pub(crate) async fn serve(
    request: Request<hyper::body::Incoming>,
    gateway: &Gateway,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let name = path.strip_prefix("/workers").unwrap_or_default();
    let allowed = if name.is_empty() { "GET" } else { "PUT, DELETE" };
    let writes = request.method() != Method::GET;
    let token_set = gateway.token.is_set();
    let Some(who) = Principal::of(&request, gateway) else {
        return unauthorized(token_set || gateway.has_tenants());
    };
    if writes && who == Principal::Admin && !token_set {
        return unauthorized(false);
    }
    match (request.method().clone(), name.strip_prefix('/')) {
        (Method::GET, None) => list(gateway, &who),
        (method @ (Method::PUT | Method::DELETE), Some(path)) => {
            let Some((owner, name)) = whose(&who, path, gateway) else {
                let body = serde_json::json!({
                    "error": "no_such_worker",
                    "message": format!("no worker `{path}` of yours"),
                });
                return json(StatusCode::NOT_FOUND, body.to_string());
            };
            let qualified = owner.qualified(&name);
            let result = if method == Method::PUT {
                let max = gateway.max_module(&owner);
                match read_deploy(request, max).await {
                    Ok(deploy) => gateway.deploy(&owner, &name, deploy).await,
                    Err(error) => Err(error),
                }
            } else {
                gateway.undeploy(&owner, &name).await
            };
            let action = if method == Method::PUT { "deploy" } else { "undeploy" };
            audit_change(gateway, &who, peer, action, &qualified, &result);
            answer(result)
        }
        _ => {
            let mut response =
                json(StatusCode::METHOD_NOT_ALLOWED, r#"{"error":"method_not_allowed"}"#.into());
            response.headers_mut().insert(header::ALLOW, allowed.parse().unwrap());
            response
        }
    }
}

/// Whose worker `path` (`NAME`, or `TENANT/NAME`) is, as `who` may name it: `None` for a
/// worker `who` may not reach (another tenant's, or of a tenant that does not exist).
fn whose(who: &Principal, path: &str, gateway: &Gateway) -> Option<(Owner, String)> {
    match (who, path.split_once('/')) {
        (Principal::Admin, None) => Some((Owner::Admin, path.to_owned())),
        (Principal::Admin, Some((tenant, name))) => {
            gateway.has_tenant(tenant).then(|| (Owner::Tenant(tenant.to_owned()), name.to_owned()))
        }
        (Principal::Tenant(tenant), None) => Some((Owner::Tenant(tenant.clone()), path.to_owned())),
        (Principal::Tenant(tenant), Some((named, name))) if named == tenant => {
            Some((Owner::Tenant(tenant.clone()), name.to_owned()))
        }
        (Principal::Tenant(_), Some(_)) => None,
    }
}

/// The audit line of a change.
fn audit_change(
    gateway: &Gateway,
    who: &Principal,
    from: SocketAddr,
    action: &'static str,
    worker: &str,
    result: &Result<Reloaded, DeployError>,
) {
    let (digest, routes) = match result {
        Ok(_) => gateway.worker_summary(worker).unwrap_or_default(),
        Err(_) => Default::default(),
    };
    let digest = if digest.is_empty() { "-".to_owned() } else { digest };
    audit::log(&Change {
        by: &who.label(),
        from,
        action,
        worker,
        digest: &digest,
        routes: &routes,
        result: result
            .as_ref()
            .map(|done| done.generation)
            .map_err(|error| crate::error::error_chain(error)),
    });
}

/// 401 for a missing or wrong token; 403 when a change needs the admin token and none is
/// set (`tokens`: whether any token could have been given).
pub(super) fn unauthorized(tokens: bool) -> Response<Full<Bytes>> {
    if !tokens {
        let body = serde_json::json!({
            "error": "admin_token_unset",
            "message": format!(
                "deploying workers needs {} set, and given as a bearer token",
                crate::config::token::TOKEN_ENV
            ),
        });
        return json(StatusCode::FORBIDDEN, body.to_string());
    }
    let mut response = json(StatusCode::UNAUTHORIZED, r#"{"error":"unauthorized"}"#.into());
    response.headers_mut().insert(header::WWW_AUTHENTICATE, "Bearer".parse().unwrap());
    response
}

/// `GET /workers`: every worker for the admin token, a tenant's own for its token.
fn list(gateway: &Gateway, who: &Principal) -> Response<Full<Bytes>> {
    let owner = match who {
        Principal::Admin => None,
        Principal::Tenant(tenant) => Some(Owner::Tenant(tenant.clone())),
    };
    let workers = gateway.worker_listing(owner.as_ref());
    json(StatusCode::OK, serde_json::json!({ "workers": workers }).to_string())
}

/// A deploy's or an undeploy's answer.
fn answer(result: Result<Reloaded, DeployError>) -> Response<Full<Bytes>> {
    let error = match result {
        Ok(done) => return json(StatusCode::OK, serde_json::to_string(&done).unwrap_or_default()),
        Err(error) => error,
    };
    let (status, code) = match &error {
        DeployError::Off => (StatusCode::NOT_FOUND, "deploy_off"),
        DeployError::NotFound(_) => (StatusCode::NOT_FOUND, "no_such_worker"),
        DeployError::BadName(_) | DeployError::BadRequest(_) => {
            (StatusCode::BAD_REQUEST, "bad_request")
        }
        DeployError::ModuleTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "module_too_large"),
        DeployError::InTheFile(_) => (StatusCode::CONFLICT, "in_the_configuration_file"),
        DeployError::NotWasm(_) => (StatusCode::UNPROCESSABLE_ENTITY, "not_wasm"),
        DeployError::Invalid(ReloadError::Config(_)) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_worker")
        }
        DeployError::Invalid(ReloadError::RestartNeeded { .. }) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "restart_needed")
        }
        DeployError::Write { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "write_failed"),
    };
    let body = serde_json::json!({
        "error": code,
        "message": crate::error::error_chain(&error),
    });
    json(status, body.to_string())
}

/// Reads a deploy's `multipart/form-data` body: the `worker` part (TOML) and the `module`
/// part, at most `max_module` bytes of it.
async fn read_deploy(
    request: Request<hyper::body::Incoming>,
    max_module: u64,
) -> Result<DeployRequest, DeployError> {
    let bad = |message: String| DeployError::BadRequest(message);
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let boundary = multer::parse_boundary(content_type)
        .map_err(|e| bad(format!("a deploy is multipart/form-data: {e}")))?;
    // The worker's TOML is small; the whole body is the module and a little more.
    let limits = multer::SizeLimit::new()
        .whole_stream(max_module + WORKER_PART_MAX)
        .for_field("worker", WORKER_PART_MAX);
    let constraints =
        multer::Constraints::new().allowed_fields(vec!["worker", "module"]).size_limit(limits);
    let body = request.into_body().into_data_stream();
    let mut parts = multer::Multipart::with_constraints(body, boundary, constraints);
    let (mut worker, mut module) = (None, None);
    while let Some(field) = parts.next_field().await.map_err(|e| too_large_or_bad(e, max_module))? {
        let name = field.name().unwrap_or_default().to_owned();
        let bytes = field.bytes().await.map_err(|e| too_large_or_bad(e, max_module))?;
        match name.as_str() {
            "worker" => worker = Some(bytes),
            _ => module = Some(bytes),
        }
    }
    let worker = worker.ok_or_else(|| bad("no `worker` part".into()))?;
    let text =
        std::str::from_utf8(&worker).map_err(|_| bad("the `worker` part is not UTF-8".into()))?;
    let mut table: toml::Table =
        text.parse().map_err(|e| bad(format!("the `worker` part: {e}")))?;
    let worker = match table.remove("worker") {
        Some(toml::Value::Table(worker)) => worker,
        _ => return Err(bad("the `worker` part needs a [worker] table".into())),
    };
    let routes = match table.remove("routes") {
        None => Vec::new(),
        Some(toml::Value::Array(routes)) => routes
            .into_iter()
            .map(|r| match r {
                toml::Value::Table(route) => Ok(route),
                _ => Err(bad("each of `routes` is a table ([[routes]])".into())),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("`routes` is a list of tables ([[routes]])".into())),
    };
    if let Some(key) = table.keys().next() {
        return Err(bad(format!("the `worker` part has `{key}`: only [worker] and [[routes]]")));
    }
    if module.is_some() && worker.contains_key("module") {
        return Err(bad("a `module` part and a `module` key: one or the other".into()));
    }
    Ok(DeployRequest { worker, routes, module })
}

/// The most bytes of the `worker` part.
const WORKER_PART_MAX: u64 = 64 << 10;

fn too_large_or_bad(error: multer::Error, max_module: u64) -> DeployError {
    match error {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            DeployError::ModuleTooLarge(format!(
                "its caps.module ({})",
                edgegate_runtime::ByteSize(max_module)
            ))
        }
        error => DeployError::BadRequest(format!("the multipart body: {error}")),
    }
}
