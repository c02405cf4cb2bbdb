//! The admin API's workers (docs/deploy.md#the-workers-api):
//!
//! * `GET /workers`: every worker served, as JSON: its module's digest, whether the API
//!   deployed it, whether its code is resident, its routes.
//! * `PUT /workers/NAME`: deploys a worker, from a `multipart/form-data` body with a `worker`
//!   part (TOML: a `[worker]` table as `[workers.NAME]` has it, and its `[[routes]]`) and a
//!   `module` part (the Wasm), and answers as `POST /reload` does.
//! * `DELETE /workers/NAME`: removes a worker the API deployed.
//!
//! Changes need `EDGEGATE_ADMIN_TOKEN` set and given as a bearer token: code is deployed only
//! by whoever holds the secret, even on loopback.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

use super::answer::json;
use crate::config::token::Token;
use crate::gateway::{DeployError, DeployRequest, Gateway, ReloadError};

/// Answers a request under `/workers`.
pub(crate) async fn serve(
    request: Request<hyper::body::Incoming>,
    gateway: &Gateway,
    token: &Token,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let name = path.strip_prefix("/workers").unwrap_or_default();
    let allowed = if name.is_empty() { "GET" } else { "PUT, DELETE" };
    let writes = request.method() != Method::GET;
    if (writes && !token.is_set()) || !token.admits(&request) {
        return unauthorized(token.is_set());
    }
    match (request.method().clone(), name.strip_prefix('/')) {
        (Method::GET, None) => list(gateway),
        (Method::PUT, Some(name)) => {
            let max = gateway.deploy_limits().max_module.bytes();
            match read_deploy(request, max).await {
                Ok(deploy) => answer(gateway.deploy(name, deploy).await),
                Err(error) => answer(Err(error)),
            }
        }
        (Method::DELETE, Some(name)) => answer(gateway.undeploy(name).await),
        _ => {
            let mut response =
                json(StatusCode::METHOD_NOT_ALLOWED, r#"{"error":"method_not_allowed"}"#.into());
            response.headers_mut().insert(header::ALLOW, allowed.parse().unwrap());
            response
        }
    }
}

fn unauthorized(token_set: bool) -> Response<Full<Bytes>> {
    if !token_set {
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

/// `GET /workers`.
fn list(gateway: &Gateway) -> Response<Full<Bytes>> {
    let workers: Vec<serde_json::Value> = gateway
        .worker_listing()
        .into_iter()
        .map(|w| {
            serde_json::json!({
                "name": w.name,
                "digest": w.digest,
                "deployed": w.deployed,
                "resident": w.resident,
                "routes": w.routes,
            })
        })
        .collect();
    json(StatusCode::OK, serde_json::json!({ "workers": workers }).to_string())
}

/// A deploy's or an undeploy's answer.
fn answer(result: Result<crate::gateway::Reloaded, DeployError>) -> Response<Full<Bytes>> {
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
            DeployError::ModuleTooLarge(edgegate_runtime::ByteSize(max_module))
        }
        error => DeployError::BadRequest(format!("the multipart body: {error}")),
    }
}
