//! A `wasi:http/proxy` component built the usual way, with `std` for `wasm32-wasip2` and the
//! `wasi` crate's bindings: std brings imports a hand-made component lacks (the `wasi:cli`
//! environment, exit and terminal interfaces, `wasi:random/insecure-seed`), which edgegate
//! links as empty, a trap and none.
//!
//! | path | answer |
//! |---|---|
//! | `/env` | the number of environment variables and arguments (none: `0 0`) |
//! | `/print` | `println!`s a line (the log gets it), then 200 `printed` |
//! | `/map` | a `HashMap` (random keys from `insecure-seed`): 200 `2` |
//! | `/exit` | `std::process::exit(3)`: a trap |
//! | `GET /kv/NS/KEY` | `wasi:keyvalue`: the value in bucket NS, or 404 |
//! | `PUT /kv/NS/KEY`, `DELETE /kv/NS/KEY` | sets it to the body, deletes it: 204 |
//! | `POST /incr/NS/KEY?N` | adds N to the counter: the sum |
//! | `GET /keys/NS` | every key, page by page: one a line |
//! | `POST /batch/NS` | sets `a`, `b`, gets `a`, `b`, `c`, deletes `a`: what it got |
//! | `GET /config/KEY`, `GET /config` | `wasi:config/store`: one value (or 404), all as `k=v` lines |
//! | `GET /header/NAME` | the request's header NAME, or 404 |
//!
//! A failed `wasi:keyvalue` call answers 502 with its error.

#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code, reason = "built for wasm32 only"))]

use std::collections::HashMap;

use wasi::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

// The interfaces the `wasi` crate does not carry, as a component author binds them: from
// their WIT, with wit-bindgen.
mod bindings {
    wit_bindgen::generate!({
        path: "../../../runtime/wit",
        world: "edgegate:components/host",
        generate_all,
    });
}

use bindings::wasi::config::store as config;
use bindings::wasi::keyvalue::{atomics, batch, store};

struct Std;

// Only for wasm32: natively a `:` in an export's name is not a linker symbol.
#[cfg(target_arch = "wasm32")]
wasi::http::proxy::export!(Std);

impl wasi::exports::http::incoming_handler::Guest for Std {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        let (status, text) = match path.as_str() {
            p if p.starts_with("/kv/")
                || p.starts_with("/incr/")
                || p.starts_with("/keys/")
                || p.starts_with("/batch/") =>
            {
                keyvalue(&request, p).unwrap_or_else(|error| (502, format!("{error:?}")))
            }
            p if p.starts_with("/config") => configured(p),
            p if p.starts_with("/header/") => header(&request, &p["/header/".len()..]),
            p => (200, plain(p)),
        };
        respond(out, status, &text);
    }
}

/// The paths that need nothing but std.
fn plain(path: &str) -> String {
    match path {
        "/env" => format!("{} {}", std::env::vars().count(), std::env::args().count()),
        "/print" => {
            println!("printed by std");
            "printed".to_owned()
        }
        "/map" => {
            let map: HashMap<&str, u8> = [("a", 1), ("b", 2)].into_iter().collect();
            map.len().to_string()
        }
        "/exit" => std::process::exit(3),
        _ => "std".to_owned(),
    }
}

fn keyvalue(request: &IncomingRequest, path: &str) -> Result<(u16, String), store::Error> {
    let mut parts = path.trim_start_matches('/').splitn(3, '/');
    let (verb, rest) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let key = parts.next().unwrap_or("");
    let (ns, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (key, query) = key.split_once('?').unwrap_or((key, query));
    let bucket = store::open(ns)?;
    Ok(match (verb, request.method()) {
        ("kv", Method::Get) => match bucket.get(key)? {
            Some(value) => (200, String::from_utf8_lossy(&value).into_owned()),
            None => (404, "missing".to_owned()),
        },
        ("kv", Method::Put) => {
            bucket.set(key, &read_body(request))?;
            (204, String::new())
        }
        ("kv", Method::Delete) => {
            bucket.delete(key)?;
            (204, String::new())
        }
        ("incr", _) => {
            (200, atomics::increment(&bucket, key, query.parse().unwrap_or(1))?.to_string())
        }
        ("keys", _) => {
            let mut keys = Vec::new();
            let mut cursor = None;
            loop {
                let page = bucket.list_keys(cursor)?;
                keys.extend(page.keys);
                match page.cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            (200, keys.join("\n"))
        }
        ("batch", _) => {
            let entries = [("a".to_owned(), b"1".to_vec()), ("b".to_owned(), b"2".to_vec())];
            batch::set_many(&bucket, &entries)?;
            let wanted = ["a", "b", "c"].map(str::to_owned);
            let got = batch::get_many(&bucket, &wanted)?;
            batch::delete_many(&bucket, &["a".to_owned()])?;
            let exists = bucket.exists("a")?;
            (200, format!("{got:?} a exists: {exists}"))
        }
        _ => (405, "method".to_owned()),
    })
}

fn configured(path: &str) -> (u16, String) {
    match path.strip_prefix("/config/") {
        Some(key) => match config::get(key) {
            Ok(Some(value)) => (200, value),
            Ok(None) => (404, "unset".to_owned()),
            Err(error) => (502, format!("{error:?}")),
        },
        None => match config::get_all() {
            Ok(mut all) => {
                all.sort();
                (200, all.iter().map(|(k, v)| format!("{k}={v}\n")).collect())
            }
            Err(error) => (502, format!("{error:?}")),
        },
    }
}

fn header(request: &IncomingRequest, name: &str) -> (u16, String) {
    let values = request.headers().get(name);
    if values.is_empty() {
        return (404, "absent".to_owned());
    }
    let values: Vec<_> = values.iter().map(|value| String::from_utf8_lossy(value)).collect();
    (200, values.join(","))
}

fn read_body(request: &IncomingRequest) -> Vec<u8> {
    let body = request.consume().expect("the body, once");
    let stream = body.stream().expect("its stream, once");
    let mut bytes = Vec::new();
    while let Ok(chunk) = stream.blocking_read(64 << 10) {
        bytes.extend_from_slice(&chunk);
    }
    bytes
}

fn respond(out: ResponseOutparam, status: u16, text: &str) {
    let response = OutgoingResponse::new(Fields::new());
    response.set_status_code(status).expect("a valid status");
    let body = response.body().expect("the body, once");
    ResponseOutparam::set(out, Ok(response));
    {
        let stream = body.write().expect("the body's stream, once");
        stream.blocking_write_and_flush(text.as_bytes()).expect("writing the body");
    }
    OutgoingBody::finish(body, None).expect("finishing the body");
}
