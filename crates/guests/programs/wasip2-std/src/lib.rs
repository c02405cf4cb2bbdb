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

#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code, reason = "built for wasm32 only"))]

use std::collections::HashMap;

use wasi::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

struct Std;

// Only for wasm32: natively a `:` in an export's name is not a linker symbol.
#[cfg(target_arch = "wasm32")]
wasi::http::proxy::export!(Std);

impl wasi::exports::http::incoming_handler::Guest for Std {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let text = match request.path_with_query().as_deref() {
            Some("/env") => format!("{} {}", std::env::vars().count(), std::env::args().count()),
            Some("/print") => {
                println!("printed by std");
                "printed".to_owned()
            }
            Some("/map") => {
                let map: HashMap<&str, u8> = [("a", 1), ("b", 2)].into_iter().collect();
                map.len().to_string()
            }
            Some("/exit") => std::process::exit(3),
            _ => "std".to_owned(),
        };
        let response = OutgoingResponse::new(Fields::new());
        let body = response.body().expect("the body, once");
        ResponseOutparam::set(out, Ok(response));
        {
            let stream = body.write().expect("the body's stream, once");
            stream.blocking_write_and_flush(text.as_bytes()).expect("writing the body");
        }
        OutgoingBody::finish(body, None).expect("finishing the body");
    }
}
