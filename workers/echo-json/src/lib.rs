//! `echo-json`: the static-json workload. POST a JSON document and get it back validated and
//! re-serialized (compact, object keys in sorted order); anything that is not JSON gets 400
//! with a JSON error naming the line and column.
//!
//! ```text
//! curl --data '{"b":[1,2.5,null],"a":"x"}' localhost:8080/echo
//! {"a":"x","b":[1,2.5,null]}
//! ```

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::format;
use edgegate_sdk::{Request, Response};
use serde_json_guest as serde_json;

/// Validates and re-serializes the JSON body.
pub fn handle(req: &Request) -> Response {
    if req.method() != "POST" {
        return Response::method_not_allowed("POST");
    }
    let value: serde_json::Value = match serde_json::from_slice(req.body()) {
        Ok(value) => value,
        Err(e) => {
            let body = format!(
                r#"{{"error":"invalid_json","line":{},"column":{}}}"#,
                e.line(),
                e.column()
            );
            return Response::json(400, body.as_bytes());
        }
    };
    match serde_json::to_vec(&value) {
        Ok(body) => Response::json(200, &body),
        // Serializing a `Value` cannot fail; answer 500 rather than panic if it ever does.
        Err(_) => Response::error(edgegate_sdk::ErrorCode::Internal, "re-serialization failed"),
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
    fn round_trips_json_compactly() {
        let r = post(br#"{ "b": [1, 2.5, null, true], "a": {"x": "\u00e9"} }"#);
        assert_eq!(r.status(), 200);
        assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
        assert_eq!(r.body(), r#"{"a":{"x":"é"},"b":[1,2.5,null,true]}"#.as_bytes());
    }

    #[test]
    fn invalid_json_is_a_400_naming_the_place() {
        let r = post(b"{\n  \"a\": tru }");
        assert_eq!(r.status(), 400);
        let body: serde_json::Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(body["error"], "invalid_json");
        assert_eq!(body["line"], 2);
    }

    #[test]
    fn empty_and_trailing_garbage_are_invalid() {
        assert_eq!(post(b"").status(), 400);
        assert_eq!(post(b"{} x").status(), 400);
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        assert_eq!(post(deep.as_bytes()).status(), 400);
    }

    #[test]
    fn only_post() {
        let r = handle(&TestRequest::new("GET", "/echo").request());
        assert_eq!(r.status(), 405);
        assert_eq!(r.header("allow"), Some(&b"POST"[..]));
    }
}
