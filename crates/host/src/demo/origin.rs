//! The demo origin: an HTTP server the gateway runs itself on a loopback port for each upstream
//! whose `url` is `builtin:demo-origin`, so the demo's whole path (token, route, forward)
//! works on a machine with no other process. Requests reach it through the real proxy and its
//! pool; it answers with what it received:
//!
//! ```text
//! {"upstream":"service-a","method":"GET","path":"/auth/orders","query":"id=7",
//!  "headers":{"x-forwarded-for":"127.0.0.1","x-jwt-sub":"ada",…},"body_bytes":0}
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Request bodies past this size are not read, only counted as too large.
const MAX_BODY: usize = 1 << 20;

/// Starts a demo origin that answers as `name`; returns where it listens and its task.
pub(crate) async fn start(name: &str) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    let name: Arc<str> = name.into();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let name = name.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let name = name.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(&name, request).await) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok((addr, task))
}

async fn answer(name: &str, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body_bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(body) => serde_json::Value::from(body.to_bytes().len()),
        Err(_) => serde_json::Value::from("too large"),
    };
    let mut headers = serde_json::Map::new();
    for name in parts.headers.keys() {
        let values: Vec<String> = parts
            .headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        headers.insert(name.as_str().to_owned(), values.join(", ").into());
    }
    let reply = serde_json::json!({
        "upstream": name,
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "headers": headers,
        "body_bytes": body_bytes,
    });
    let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}
