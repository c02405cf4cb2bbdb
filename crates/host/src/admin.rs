//! The admin listener: `GET /healthz` answers 200 while serving and 503 while draining;
//! `GET /metrics` answers the Prometheus text format (see [`crate::metrics`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Serves the admin endpoints until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, draining: Arc<AtomicBool>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let draining = draining.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let draining = draining.load(Ordering::Relaxed);
                async move { Ok::<_, std::convert::Infallible>(respond(request.uri().path(), draining)) }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn respond(path: &str, draining: bool) -> Response<Full<Bytes>> {
    if path == "/metrics"
        && let Some(text) = crate::metrics::render()
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
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    response
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
