//! `echo-json-component`: `echo-json` as a standard `wasi:http/proxy` component. The same
//! compactor (`edgegate-json-compact`) and the same answers, status for status and byte for
//! byte: 200 with the compact document, 400 naming the line and column, 405 to anything but
//! POST. Only the ABI differs, so the lab can put a price on it
//! (`edgegate bench --capacity --runtimes edgegate,edgegate-component`).
//!
//! Built for `wasm32-unknown-unknown` with the `wasip2` bindings and wrapped into a component
//! by the guests' build script (`wit-component`), as `edgegate build` does.

#![cfg_attr(
    not(target_arch = "wasm32"),
    allow(dead_code, reason = "the component is exported for wasm32 only")
)]

use std::borrow::Cow;

use wasip2::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::StreamError;

struct Component;

// Exported for wasm32 only: natively (`cargo test`) there is no component to export from.
#[cfg(target_arch = "wasm32")]
wasip2::http::proxy::export!(Component);

impl wasip2::exports::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let body = match request.method() {
            Method::Post => Some(read_body(request)),
            _ => None,
        };
        let (status, headers, answer) = answer(body.as_deref());
        let fields: Vec<(String, Vec<u8>)> =
            headers.iter().map(|&(name, value)| (name.to_owned(), value.to_vec())).collect();
        let response = OutgoingResponse::new(Fields::from_list(&fields).expect("valid headers"));
        response.set_status_code(status).expect("a valid status");
        let outgoing = response.body().expect("the body, once");
        ResponseOutparam::set(out, Ok(response));
        {
            let stream = outgoing.write().expect("the body's stream, once");
            // `blocking-write-and-flush` takes at most 4096 bytes a call.
            for chunk in answer.chunks(4096) {
                stream.blocking_write_and_flush(chunk).expect("writing the body");
            }
        }
        OutgoingBody::finish(outgoing, None).expect("finishing the body");
    }
}

/// Response headers: names and values.
pub type Headers = &'static [(&'static str, &'static [u8])];

/// The status, headers and body answering a POST of `body`, or (`None`) another method.
pub fn answer(body: Option<&[u8]>) -> (u16, Headers, Cow<'_, [u8]>) {
    const JSON: Headers = &[("content-type", b"application/json")];
    const NOT_ALLOWED: Headers = &[("allow", b"POST"), ("content-type", b"application/json")];
    let Some(body) = body else {
        return (405, NOT_ALLOWED, Cow::Borrowed(br#"{"error":"method_not_allowed"}"#));
    };
    match edgegate_json_compact::compact(body) {
        Ok(compact) => (200, JSON, compact),
        Err(at) => (400, JSON, Cow::Owned(edgegate_json_compact::error_body(body, at))),
    }
}

/// All of the request's body, read in one buffer sized by its `content-length`.
fn read_body(request: IncomingRequest) -> Vec<u8> {
    let length = request.headers().get("content-length").into_iter().next();
    let hint = length
        .and_then(|v| std::str::from_utf8(&v).ok().and_then(|s| s.parse::<usize>().ok()))
        .unwrap_or(0);
    let mut bytes = Vec::with_capacity(hint);
    let incoming = request.consume().expect("the body, once");
    {
        let stream = incoming.stream().expect("the body's stream, once");
        loop {
            match stream.blocking_read(64 << 10) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => panic!("{}", e.to_debug_string()),
            }
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::answer;

    #[test]
    fn answers_as_echo_json_does() {
        let (status, headers, body) = answer(Some(b" { \"b\" : [1, null],\n \"a\": \"x\" } "));
        assert_eq!((status, &*body), (200, &br#"{"b":[1,null],"a":"x"}"#[..]));
        assert_eq!(headers, &[("content-type", &b"application/json"[..])]);

        let (status, _, body) = answer(Some(b"{\n  \"a\": tru }"));
        let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 400);
        assert_eq!((error["line"].as_u64(), error["column"].as_u64()), (Some(2), Some(11)));

        let (status, headers, _) = answer(None);
        assert_eq!(status, 405);
        assert!(headers.contains(&("allow", &b"POST"[..])));
    }
}
