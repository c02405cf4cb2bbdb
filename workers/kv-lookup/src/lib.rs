//! `kv-lookup`: the db-lookup workload. A key in the path, a value in a KV namespace.
//!
//! | request | answer |
//! |---|---|
//! | `GET /kv/{key}` | 200 and the value, or 404 |
//! | `PUT /kv/{key}` with the value as the body | 204 |
//! | `DELETE /kv/{key}` | 204, or 404 |
//!
//! The key is the rest of the path, percent-decoded: any bytes, at most 512. A key that is
//! empty or too long gets 400, a value over the worker's cap 413, a store that cannot answer
//! 503 with `Retry-After`, a namespace the worker is not granted 500 (a configuration error).
//!
//! Configuration (`[workers.NAME.config]`, all optional):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `namespace` | `demo` | the KV namespace |
//! | `prefix` | `/kv/` | the path before the key |
//! | `content_type` | `application/octet-stream` | the `content-type` of a value |
//! | `ttl_ms` | none | how long a stored value lives |
//!
//! ```text
//! curl localhost:8080/kv/user:1            # a 256-byte JSON profile from the demo data
//! curl -X PUT --data 'hello' localhost:8080/kv/greeting
//! ```

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::vec::Vec;

use edgegate_sdk::host::Config;
use edgegate_sdk::kv;
use edgegate_sdk::{HostError, Request, Response};

/// The longest key the host accepts.
const MAX_KEY: usize = edgegate_sdk::kv::MAX_KEY_LEN;

/// The answer to a failed KV call.
fn store_error(e: HostError) -> Response {
    match e {
        HostError::LimitExceeded => Response::json_error(413, "too_large"),
        HostError::Unavailable | HostError::Timeout => Response::builder(503)
            .header("retry-after", "1")
            .header("content-type", "application/json")
            .body(br#"{"error":"store_unavailable"}"#),
        HostError::NotGranted => Response::json_error(500, "namespace_not_granted"),
        _ => Response::json_error(500, "store_error"),
    }
}

/// `%XX` decoded; `None` for a malformed escape.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            let hi = hex(bytes.next()?)?;
            let lo = hex(bytes.next()?)?;
            out.push((hi * 16 + lo) as u8);
        } else {
            out.push(b);
        }
    }
    Some(out)
}

/// Serves one request.
pub fn handle(req: &Request) -> Response {
    let config = Config::load();
    let prefix = config.get("prefix").unwrap_or("/kv/");
    let ns = kv::namespace(config.get("namespace").unwrap_or("demo"));
    let Some(key) = req.path().strip_prefix(prefix).and_then(percent_decode) else {
        return Response::json_error(400, "bad_key");
    };
    if key.is_empty() || key.len() > MAX_KEY {
        return Response::json_error(400, "bad_key");
    }
    match req.method() {
        "GET" => match ns.get(&key) {
            Ok(Some(value)) => Response::builder(200)
                .header(
                    "content-type",
                    config.get("content_type").unwrap_or("application/octet-stream"),
                )
                .body(&value),
            Ok(None) => Response::json_error(404, "not_found"),
            Err(e) => store_error(e),
        },
        "PUT" => {
            let ttl = config.get("ttl_ms").and_then(|t| t.parse().ok());
            match ns.put_with_ttl(&key, req.body(), ttl) {
                Ok(()) => Response::new(204, b""),
                Err(e) => store_error(e),
            }
        }
        "DELETE" => match ns.delete(&key) {
            Ok(true) => Response::new(204, b""),
            Ok(false) => Response::json_error(404, "not_found"),
            Err(e) => store_error(e),
        },
        _ => Response::method_not_allowed("GET, PUT, DELETE"),
    }
}

edgegate_sdk::export!(handle);

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::testing::TestRequest;

    #[test]
    fn keys_are_percent_decoded_bytes() {
        assert_eq!(percent_decode("user%3A1%2Fx").as_deref(), Some(&b"user:1/x"[..]));
        assert_eq!(percent_decode("%ff%00").as_deref(), Some(&b"\xff\x00"[..]));
        assert_eq!(percent_decode("bad%4"), None);
        assert_eq!(percent_decode("bad%zz"), None);
    }

    #[test]
    fn bad_keys_and_methods_are_refused_before_the_store() {
        let r = handle(&TestRequest::new("GET", "/kv/").request());
        assert_eq!(r.status(), 400);
        let long = alloc::format!("/kv/{}", "k".repeat(MAX_KEY + 1));
        assert_eq!(handle(&TestRequest::new("GET", &long).request()).status(), 400);
        assert_eq!(handle(&TestRequest::new("GET", "/elsewhere").request()).status(), 400);
        assert_eq!(handle(&TestRequest::new("POST", "/kv/a").request()).status(), 405);
    }

    #[test]
    fn store_errors_have_statuses() {
        // Natively no namespace is granted.
        assert_eq!(handle(&TestRequest::new("GET", "/kv/a").request()).status(), 500);
        assert_eq!(store_error(HostError::Timeout).status(), 503);
        assert_eq!(store_error(HostError::Unavailable).header("retry-after"), Some(&b"1"[..]));
        assert_eq!(store_error(HostError::LimitExceeded).status(), 413);
    }
}
