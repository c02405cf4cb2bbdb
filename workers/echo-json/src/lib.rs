//! `echo-json`: the static-json workload. POST a JSON document and get it back validated and
//! compact: whitespace between tokens removed, everything else as sent (key order, number and
//! string spellings). Anything that is not JSON (RFC 8259, nested at most 128 deep) gets 400
//! with a JSON error naming the line and column.
//!
//! ```text
//! curl --data '{"b": [1, 2.5, null], "a": "x"}' localhost:8080/echo
//! {"b":[1,2.5,null],"a":"x"}
//! ```
//!
//! The compactor is `edgegate-json-compact`, which `echo-json-component` (the same worker as a
//! `wasi:http` component) uses too.

#![cfg_attr(target_arch = "wasm32", no_std)]

use edgegate_sdk::{Request, Response};

pub use edgegate_json_compact::{MAX_DEPTH, compact, line_and_column};

/// Validates and compacts the JSON body.
pub fn handle(req: &Request) -> Response {
    if req.method() != "POST" {
        return Response::method_not_allowed("POST");
    }
    match compact(req.body()) {
        Ok(body) => Response::json(200, &body),
        Err(at) => Response::json(400, &edgegate_json_compact::error_body(req.body(), at)),
    }
}

edgegate_sdk::export!(handle);

#[cfg(test)]
mod tests {
    use super::*;
    use edgegate_sdk::testing::TestRequest;

    fn post(body: &[u8]) -> Response {
        handle(&TestRequest::new("POST", "/echo").body(body).request())
    }

    #[test]
    fn answers_the_compact_document_as_json() {
        let r = post(b" { \"b\" : [1, null],\n \"a\": \"x\" } ");
        assert_eq!(r.status(), 200);
        assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
        assert_eq!(r.body(), br#"{"b":[1,null],"a":"x"}"#);
    }

    #[test]
    fn invalid_json_is_a_400_naming_the_place() {
        let r = post(b"{\n  \"a\": tru }");
        assert_eq!(r.status(), 400);
        assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
        let body: serde_json::Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(body["error"], "invalid_json");
        assert_eq!((body["line"].as_u64(), body["column"].as_u64()), (Some(2), Some(11)));
        assert_eq!(post("[".repeat(100_000).as_bytes()).status(), 400);
    }

    #[test]
    fn only_post() {
        let r = handle(&TestRequest::new("GET", "/echo").request());
        assert_eq!(r.status(), 405);
        assert_eq!(r.header("allow"), Some(&b"POST"[..]));
    }
}
