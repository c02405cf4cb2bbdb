//! `kv-lookup-component`: `kv-lookup` as a standard `wasi:http/proxy` component. A key in the
//! path, a value in a bucket through `wasi:keyvalue`; its settings through `wasi:config/store`.
//! The same answers as kv-lookup, status for status:
//!
//! | request | answer |
//! |---|---|
//! | `GET {prefix}{key}` | 200 and the value, or 404 `not_found` |
//! | `PUT {prefix}{key}` with the value as the body | 204 |
//! | `DELETE {prefix}{key}` | 204 |
//!
//! The key is the rest of the path, percent-decoded (UTF-8: a `wasi:keyvalue` key is a
//! string), at most 512 bytes; otherwise 400 `bad_key`. A bucket that fails (not granted,
//! Redis down, a value over the cap) is 503 `store_unavailable` with `Retry-After: 1`, and
//! the error goes to stderr, which the gateway logs.
//!
//! Configuration (`[workers.NAME.config]`, all optional): `namespace` (default `demo`),
//! `prefix` (default `/kv/`), `content_type` (default `application/octet-stream`).

#![cfg_attr(
    not(target_arch = "wasm32"),
    allow(dead_code, reason = "the component is exported for wasm32 only")
)]

use wasip2::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::StreamError;

mod bindings {
    wit_bindgen::generate!({
        path: "../../crates/runtime/wit",
        world: "edgegate:components/host",
        generate_all,
    });
}

use bindings::wasi::config::store as config;
use bindings::wasi::keyvalue::store;

/// The longest key the gateway stores.
const MAX_KEY: usize = 512;

struct Component;

// Exported for wasm32 only: natively (`cargo test`) there is no component to export from.
#[cfg(target_arch = "wasm32")]
wasip2::http::proxy::export!(Component);

/// An answer: status, headers, body.
type Answer = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

impl wasip2::exports::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let (status, headers, body) = serve(request);
        let response = OutgoingResponse::new(Fields::from_list(&headers).expect("valid headers"));
        response.set_status_code(status).expect("a valid status");
        let outgoing = response.body().expect("the body, once");
        ResponseOutparam::set(out, Ok(response));
        {
            let stream = outgoing.write().expect("the body's stream, once");
            // `blocking-write-and-flush` takes at most 4096 bytes a call.
            for chunk in body.chunks(4096) {
                stream.blocking_write_and_flush(chunk).expect("writing the body");
            }
        }
        OutgoingBody::finish(outgoing, None).expect("finishing the body");
    }
}

fn setting(key: &str) -> Option<String> {
    config::get(key).ok().flatten()
}

fn serve(request: IncomingRequest) -> Answer {
    let prefix = setting("prefix").unwrap_or_else(|| "/kv/".to_owned());
    let path = request.path_with_query().unwrap_or_default();
    let path = path.split_once('?').map_or(path.as_str(), |(path, _)| path);
    let Some(key) = path.strip_prefix(&prefix).and_then(key) else {
        return json_error(400, "bad_key");
    };
    let method = request.method();
    let answered = store::open(&setting("namespace").unwrap_or_else(|| "demo".to_owned()))
        .and_then(|bucket| match method {
            Method::Get => Ok(match bucket.get(&key)? {
                Some(value) => {
                    let content_type = setting("content_type")
                        .unwrap_or_else(|| "application/octet-stream".to_owned());
                    (200, vec![("content-type".to_owned(), content_type.into_bytes())], value)
                }
                None => json_error(404, "not_found"),
            }),
            Method::Put => {
                bucket.set(&key, &read_body(request))?;
                Ok((204, Vec::new(), Vec::new()))
            }
            Method::Delete => {
                bucket.delete(&key)?;
                Ok((204, Vec::new(), Vec::new()))
            }
            _ => {
                let mut answer = json_error(405, "method_not_allowed");
                answer.1.push(("allow".to_owned(), b"GET, PUT, DELETE".to_vec()));
                Ok(answer)
            }
        });
    answered.unwrap_or_else(|error| {
        eprintln!("kv: {error:?}");
        let mut answer = json_error(503, "store_unavailable");
        answer.1.push(("retry-after".to_owned(), b"1".to_vec()));
        answer
    })
}

/// The key in the rest of a path: percent-decoded, UTF-8, 1 to 512 bytes.
pub fn key(text: &str) -> Option<String> {
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
    let key = String::from_utf8(out).ok()?;
    (!key.is_empty() && key.len() <= MAX_KEY).then_some(key)
}

fn json_error(status: u16, code: &str) -> Answer {
    let headers = vec![("content-type".to_owned(), b"application/json".to_vec())];
    (status, headers, format!(r#"{{"error":"{code}"}}"#).into_bytes())
}

fn read_body(request: IncomingRequest) -> Vec<u8> {
    let body = request.consume().expect("the body, once");
    let mut bytes = Vec::new();
    {
        let stream = body.stream().expect("the body's stream, once");
        loop {
            match stream.blocking_read(64 << 10) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => panic!("{}", e.to_debug_string()),
            }
        }
    }
    wasip2::http::types::IncomingBody::finish(body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::key;

    #[test]
    fn keys_are_percent_decoded_text_of_at_most_512_bytes() {
        assert_eq!(key("user%3A1%2Fx").as_deref(), Some("user:1/x"));
        assert_eq!(key("bad%4"), None);
        assert_eq!(key("%ff"), None, "not UTF-8");
        assert_eq!(key(""), None);
        assert_eq!(key(&"k".repeat(513)), None);
        assert!(key(&"k".repeat(512)).is_some());
    }
}
