//! The native-Rust comparator: the four workloads as a plain hyper server, no Wasm. It is the
//! ceiling that shows what Wasm costs.
//!
//! The logic is the workers' own where it can be: the image path calls what edgegate's image
//! capability runs ([`edgegate_image::transform`], libjpeg-turbo and SIMD resampling), and the
//! token is checked by the SDK's
//! [`edgegate_sdk::jwt::verify`] (compiled natively, with `ring` as the key) under the same
//! policy the gateway gives `auth-router`. Echo validates and compacts with the `echo-json`
//! worker's [`echo_json::compact`]; lookups read a `HashMap`. Orders are priced by the `json-transform`
//! worker's [`json_transform::order::summarize`], from a `HashMap` of parsed products.

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;
use edgegate_sdk::jwt::{self, Alg, Validation, Verifier};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use json_transform::order::{self, Product, Refusal};
use parking_lot::RwLock;

use crate::workload::ISSUER;

/// The server's state: the HMAC key and the store.
#[derive(Debug)]
pub struct Native {
    key: Hs256,
    validation: Validation,
    store: RwLock<HashMap<String, Bytes>>,
    catalog: HashMap<String, Product>,
    resize: edgegate_image::TransformSpec,
}

#[derive(Debug)]
struct Hs256(ring::hmac::Key);

impl Verifier for Hs256 {
    fn verify(
        &self,
        alg: Alg,
        _kid: Option<&[u8]>,
        signing_input: &[u8],
        signature: &[u8],
    ) -> Result<(), jwt::Error> {
        if alg != Alg::Hs256 {
            return Err(jwt::Error::AlgMismatch);
        }
        ring::hmac::verify(&self.0, signing_input, signature).map_err(|_| jwt::Error::BadSignature)
    }
}

/// The native comparator's TLS: the certificate, ring, stateless tickets and the default
/// session cache, ALPN `http/1.1` (it serves HTTP/1.1 only).
pub fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.ticketer = rustls::crypto::ring::Ticketer::new()?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The audiences with a route, as in `auth-router`.
const ROUTES: [&str; 2] = ["service-a", "service-b"];

impl Native {
    /// A server verifying with `secret`, serving `profiles`, and pricing orders from `catalog`
    /// (SKU and the product's JSON).
    pub fn new(
        secret: &[u8],
        profiles: impl IntoIterator<Item = (String, Bytes)>,
        catalog: impl IntoIterator<Item = (String, Bytes)>,
    ) -> anyhow::Result<Self> {
        let catalog = catalog
            .into_iter()
            .map(|(sku, json)| {
                let product = Product::from_json(&json)
                    .with_context(|| format!("catalog entry {sku} is not a product"))?;
                Ok((sku, product))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            key: Hs256(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)),
            validation: Validation {
                issuer: Some(ISSUER.into()),
                required: vec!["exp".into(), "sub".into()],
                ..Validation::default()
            },
            store: RwLock::new(profiles.into_iter().collect()),
            catalog,
            resize: edgegate_image::TransformSpec {
                width: crate::workload::RESIZED.0.into(),
                height: crate::workload::RESIZED.1.into(),
                ..Default::default()
            },
        })
    }

    /// Serves on `listen`, and with `tls` on its address too, until the process ends;
    /// prints `listening on http://ADDR` first.
    pub fn serve(
        self,
        listen: SocketAddr,
        tls: Option<(SocketAddr, Arc<rustls::ServerConfig>)>,
    ) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind(listen).await?;
            let state = Arc::new(self);
            if let Some((addr, config)) = tls {
                let listener = tokio::net::TcpListener::bind(addr).await?;
                let acceptor = tokio_rustls::TlsAcceptor::from(config);
                let state = state.clone();
                tokio::spawn(async move {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else { continue };
                        let _ = stream.set_nodelay(true);
                        let (acceptor, state) = (acceptor.clone(), state.clone());
                        tokio::spawn(async move {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                state.serve_connection(stream).await;
                            }
                        });
                    }
                });
            }
            println!("listening on http://{}", listener.local_addr()?);
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let _ = stream.set_nodelay(true);
                tokio::spawn(state.clone().serve_connection(stream));
            }
        })
    }

    /// Serves HTTP/1.1 on one connection.
    async fn serve_connection<S>(self: Arc<Self>, stream: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = hyper::service::service_fn(move |req| {
            let state = self.clone();
            async move { Ok::<_, Infallible>(state.handle(req).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await;
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
            return json(400, r#"{"error":"bad_body"}"#.into());
        };
        let path = parts.uri.path();
        match (&parts.method, path) {
            (&Method::POST, "/echo") => echo(&body),
            (&Method::POST, "/orders/summary") => self.summary(&body),
            (&Method::POST, "/resize") => self.resize(body),
            (_, p) if p.starts_with("/auth/") => {
                let authorization = parts.headers.get(http::header::AUTHORIZATION);
                let token = authorization.and_then(|v| v.to_str().ok()?.strip_prefix("Bearer "));
                self.auth(token.unwrap_or(""))
            }
            (method, p) if p.starts_with("/kv/") => self.kv(method, &p[4..], body),
            _ => json(404, r#"{"error":"no_route"}"#.into()),
        }
    }

    fn auth(&self, token: &str) -> Response<Full<Bytes>> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let Ok(jwt) = jwt::verify(token, &self.validation, &self.key, now) else {
            return json(401, r#"{"error":"invalid_token"}"#.into());
        };
        let (mut route, mut sub, mut scope) = (None, None, None);
        for (key, value) in jwt.claims().iter() {
            let text = || value.as_json_str().and_then(|s| s.as_str());
            if key.eq_str("aud") {
                route = value.strings().find_map(|a| ROUTES.into_iter().find(|r| a.eq_str(r)));
            } else if key.eq_str("sub") {
                sub = text();
            } else if key.eq_str("scope") {
                scope = text();
            }
        }
        let Some(route) = route else {
            return json(403, r#"{"error":"unknown_audience"}"#.into());
        };
        // Built by hand to keep `auth-router`'s field order (serde_json would sort the keys).
        let mut body = format!(r#"{{"upstream":{},"set":{{"#, serde_json::Value::from(route));
        for (i, (k, v)) in [("x-jwt-sub", sub), ("x-jwt-scope", scope)]
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .enumerate()
        {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&format!(
                "{}:{}",
                serde_json::Value::from(k),
                serde_json::Value::from(v)
            ));
        }
        body.push_str("}}");
        json(200, body.into())
    }

    fn resize(&self, body: Bytes) -> Response<Full<Bytes>> {
        let budget = edgegate_image::Budget {
            cpu: std::time::Duration::from_secs(1),
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(1),
        };
        let limits = edgegate_image::Limits::default();
        match edgegate_image::transform(&body, &self.resize, &limits, &budget).0 {
            Ok(out) => respond(200, "image/jpeg", out.bytes.into()),
            Err(edgegate_image::Error::Invalid(_)) => {
                json(400, r#"{"error":"invalid_image"}"#.into())
            }
            Err(_) => json(413, r#"{"error":"image_too_large"}"#.into()),
        }
    }

    fn summary(&self, body: &[u8]) -> Response<Full<Bytes>> {
        let lookup = |skus: &[&str]| {
            Ok::<_, Infallible>(skus.iter().map(|s| self.catalog.get(*s)).collect())
        };
        match order::summarize(body, lookup) {
            Ok(summary) => json(200, summary.into()),
            Err(Refusal::TooManyItems) => json(422, r#"{"error":"too_many_items"}"#.into()),
            Err(Refusal::UnknownSku(sku)) => json(
                422,
                format!(r#"{{"error":"unknown_sku","sku":{}}}"#, serde_json::Value::from(sku))
                    .into(),
            ),
            Err(Refusal::InvalidOrder | Refusal::Lookup(_)) => {
                json(400, r#"{"error":"invalid_order"}"#.into())
            }
        }
    }

    fn kv(&self, method: &Method, key: &str, body: Bytes) -> Response<Full<Bytes>> {
        match *method {
            Method::GET => {
                let store = self.store.read();
                match store.get(key) {
                    Some(value) => respond(200, "application/json", value.clone()),
                    None => json(404, r#"{"error":"not_found"}"#.into()),
                }
            }
            Method::PUT => {
                let mut store = self.store.write();
                store.insert(key.to_string(), body);
                respond(204, "application/json", Bytes::new())
            }
            _ => json(405, r#"{"error":"method_not_allowed"}"#.into()),
        }
    }
}

fn echo(body: &Bytes) -> Response<Full<Bytes>> {
    match echo_json::compact(body) {
        Ok(Cow::Borrowed(_)) => json(200, body.clone()),
        Ok(Cow::Owned(compacted)) => json(200, compacted.into()),
        Err(at) => {
            let (line, column) = echo_json::line_and_column(body, at);
            json(
                400,
                format!(r#"{{"error":"invalid_json","line":{line},"column":{column}}}"#).into(),
            )
        }
    }
}

fn json(status: u16, body: Bytes) -> Response<Full<Bytes>> {
    respond(status, "application/json", body)
}

fn respond(status: u16, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    response
}
