//! The admin listener: `GET /healthz` answers 200 while serving and 503 while draining;
//! `GET /metrics` answers the Prometheus text format (see [`crate::observe::metrics`]); `POST /reload`
//! reloads the configuration and workers and answers with the result as JSON; `/workers` is
//! the workers API (`crate::server::workers`); `/tenants/NAME/usage` a tenant's usage
//! (`crate::server::usage`). With tenants configured, `/metrics` needs the admin token. When
//! `EDGEGATE_ADMIN_TOKEN` is set, `/reload` needs `Authorization: Bearer <that token>`; set
//! and empty, the gateway refuses to start (an empty secret must not open the door).
//!
//! Its connections are HTTP/1.1, held to the main listener's first-byte, header and idle
//! timeouts (the `serve` module), and at most `server.admin_max_connections` are open at once;
//! more wait in the kernel's accept queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::sync::Semaphore;

use super::answer::json;
use crate::config::token::Token;
use crate::gateway::{Gateway, ReloadError};
use crate::listen::accept::Acceptor;
use crate::listen::watchdog::Timeouts;

/// What the admin listener's connections need.
pub(crate) struct Listener {
    /// Set while the gateway drains: `/healthz` says so.
    pub(crate) draining: Arc<AtomicBool>,
    pub(crate) gateway: Arc<Gateway>,
    /// The `[server]` timeouts, as the main listener's.
    pub(crate) timeouts: Timeouts,
    /// HTTP/1.1 only, with the `[server]` header limits.
    pub(crate) builder: auto::Builder<TokioExecutor>,
    /// `server.admin_max_connections` places.
    pub(crate) connections: Arc<Semaphore>,
}

/// Serves the admin endpoints until the task is aborted.
pub(crate) async fn serve(mut acceptor: Acceptor, listener: Listener) {
    let listener = Arc::new(listener);
    loop {
        let Ok(place) = listener.connections.clone().acquire_owned().await else { return };
        let (stream, peer) = acceptor.accept().await;
        let accepted = std::time::Instant::now();
        let listener = listener.clone();
        tokio::spawn(async move {
            let handler = {
                let listener = listener.clone();
                move |request: Request<hyper::body::Incoming>| {
                    let draining = listener.draining.load(Ordering::Relaxed);
                    let gateway = listener.gateway.clone();
                    async move {
                        let path = request.uri().path();
                        if path == "/reload" {
                            reload(&request, &gateway, &gateway.token).await
                        } else if path == "/workers" || path.starts_with("/workers/") {
                            crate::server::workers::serve(request, &gateway, peer).await
                        } else if path.starts_with("/tenants/") {
                            crate::server::usage::serve(&request, &gateway)
                        } else if path == "/metrics" && !metrics_allowed(&request, &gateway) {
                            crate::server::workers::unauthorized(true)
                        } else {
                            if path == "/metrics" {
                                let stats = gateway.runtime.resident_stats();
                                crate::observe::metrics::record_resident(stats);
                            }
                            respond(request.uri().path(), draining)
                        }
                    }
                }
            };
            let (timeouts, builder) = (listener.timeouts, &listener.builder);
            crate::listen::serve::serve(stream, peer, accepted, timeouts, builder, None, handler)
                .await;
            drop(place);
        });
    }
}

/// Whether `request` may read `/metrics`: anyone while no tenant is configured (the admin
/// listener is the operator's); with tenants, whose names and usage it shows, the admin token
/// only (a Prometheus scrape sends it as a bearer token).
fn metrics_allowed<B>(request: &Request<B>, gateway: &Gateway) -> bool {
    !gateway.has_tenants()
        || super::principal::Principal::of(request, gateway)
            == Some(super::principal::Principal::Admin)
}

/// `POST /reload`: 200 with the generation and what changed, 422 with the error (the old
/// version still serving), 401 without the token, 405 for another method.
async fn reload<B>(
    request: &Request<B>,
    gateway: &Gateway,
    token: &Token,
) -> Response<Full<Bytes>> {
    if request.method() != Method::POST {
        let mut response =
            json(StatusCode::METHOD_NOT_ALLOWED, r#"{"error":"method_not_allowed"}"#.into());
        response.headers_mut().insert(header::ALLOW, "POST".parse().unwrap());
        return response;
    }
    if !token.admits(request) {
        let mut response = json(StatusCode::UNAUTHORIZED, r#"{"error":"unauthorized"}"#.into());
        response.headers_mut().insert(header::WWW_AUTHENTICATE, "Bearer".parse().unwrap());
        return response;
    }
    match gateway.reload().await {
        Ok(done) => json(StatusCode::OK, serde_json::to_string(&done).unwrap_or_default()),
        Err(error) => {
            let code = match error {
                ReloadError::Config(_) => "invalid_config",
                ReloadError::RestartNeeded { .. } => "restart_needed",
            };
            let body = serde_json::json!({
                "error": code,
                "message": crate::error::error_chain(&error),
                "generation": gateway.generation(),
            });
            json(StatusCode::UNPROCESSABLE_ENTITY, body.to_string())
        }
    }
}

fn respond(path: &str, draining: bool) -> Response<Full<Bytes>> {
    if path == "/metrics"
        && let Some(text) = crate::observe::metrics::render()
    {
        let mut response = Response::new(Full::new(Bytes::from(text)));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8".parse().unwrap(),
        );
        return response;
    }
    let (status, body) = match (path, draining) {
        ("/healthz", false) => (StatusCode::OK, r#"{"status":"ok"}"#),
        ("/healthz", true) => (StatusCode::SERVICE_UNAVAILABLE, r#"{"status":"draining"}"#),
        _ => (StatusCode::NOT_FOUND, r#"{"error":"no_route"}"#),
    };
    json(status, body.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_reports_draining() {
        assert_eq!(respond("/healthz", false).status(), 200);
        assert_eq!(respond("/healthz", true).status(), 503);
        assert_eq!(respond("/other", false).status(), 404);
    }
}
