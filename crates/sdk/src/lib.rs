//! The edgegate guest SDK: write a worker as one function, `fn handle(req: &Request) ->
//! Response`, and build it for `wasm32-unknown-unknown`.
//!
//! The gateway runs every request in a fresh Wasm instance and throws it away afterwards. The
//! SDK is built around that:
//!
//! * [`arena`]: a bump allocator is the global allocator; freeing does nothing.
//! * [`Request`]: a zero-copy view of the request the host wrote into guest memory once.
//! * [`Response`]: what the worker answers: a response, a [`Forward`] directive to an upstream,
//!   or an error ([`ErrorCode`]). It is encoded as it is built, so returning it copies nothing.
//! * [`host`]: the host functions (log, clocks, random bytes, configuration).
//! * [`jwt`]: JWT validation, with signatures checked by the host's keys.
//! * [`router`]: route tables compiled into the module, searched by binary search.
//! * [`export!`]: exports the handler under the ABI's entry point.
//!
//! A panic in a worker traps: the gateway answers 500 and logs the panic message. On a native
//! target the host functions are inert, so worker logic can be unit tested with
//! [`testing::TestRequest`].
//!
//! ```
//! use edgegate_sdk::{Request, Response};
//!
//! fn handle(req: &Request) -> Response {
//!     match req.header("x-name") {
//!         Some(name) => Response::builder(200).header("content-type", "text/plain").body(name),
//!         None => Response::json(400, br#"{"error":"missing x-name"}"#),
//!     }
//! }
//! edgegate_sdk::export!(handle);
//!
//! # use edgegate_sdk::testing::TestRequest;
//! let req = TestRequest::new("GET", "/").header("X-Name", "ada");
//! assert_eq!(handle(&req.request()).body(), b"ada");
//! ```

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

#[cfg(test)]
extern crate std;

pub mod arena;
mod blob;
pub mod fetch;
pub mod host;
pub mod image;
pub mod json;
pub mod jwt;
pub mod kv;
mod request;
mod response;
pub mod router;
mod sys;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

pub use blob::Blob;
pub use edgegate_abi::outcome::{EditOp, ErrorCode};
pub use edgegate_abi::{HostError, LogLevel};
pub use request::Request;
pub use response::{Forward, Response, ResponseBuilder};

/// The global allocator of every worker built with this SDK.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ARENA: arena::Arena<arena::LinearMemory> = arena::Arena::new(arena::LinearMemory);

/// A panic becomes a trap, after its message is logged (cut to fit a small stack buffer).
#[cfg(target_arch = "wasm32")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    use core::fmt::Write;
    let mut message = host::LineBuffer::<256>::new();
    let _ = write!(message, "worker panicked: {}", info.message());
    if let Some(location) = info.location() {
        let _ = write!(message, " at {}:{}", location.file(), location.line());
    }
    host::log(LogLevel::Error, message.as_str());
    core::arch::wasm32::unreachable()
}

/// Exports `handler` as the worker's entry point.
///
/// ```ignore
/// fn handle(req: &edgegate_sdk::Request) -> edgegate_sdk::Response { /* … */ }
/// edgegate_sdk::export!(handle);
/// ```
///
/// With `body = host`, the request's body is not copied into the worker's memory: the host
/// keeps it as [`Blob::BODY`], [`Request::body`] is empty, and the worker reads the body or
/// hands it to the host (an [`image`] transform) by handle. For a worker whose bodies are
/// large and whose work the host does:
///
/// ```ignore
/// edgegate_sdk::export!(handle, body = host);
/// ```
///
/// On wasm32 this defines the `edgegate_v1_handle` export; on other targets it expands to
/// nothing, so the crate still builds and tests natively.
#[macro_export]
macro_rules! export {
    ($handler:path) => {
        #[cfg(target_arch = "wasm32")]
        #[unsafe(export_name = "edgegate_v1_handle")]
        extern "C" fn __edgegate_v1_handle(request_len: u32) -> u64 {
            $crate::__private::serve(request_len, $handler)
        }
    };
    ($handler:path, body = host) => {
        #[cfg(target_arch = "wasm32")]
        #[unsafe(export_name = "edgegate_v1_handle")]
        extern "C" fn __edgegate_v1_handle(request_len: u32) -> u64 {
            $crate::__private::serve_head(request_len, $handler)
        }
    };
}

#[doc(hidden)]
pub mod __private {
    use crate::{ErrorCode, Request, Response};
    use alloc::vec;

    /// Reads the request, runs the handler, and returns the packed outcome buffer.
    pub fn serve(request_len: u32, handler: fn(&Request<'_>) -> Response) -> u64 {
        // Zeroed arena memory is fresh and costs no memset (see `arena`).
        let mut buf = vec![0u8; request_len as usize];
        let read = crate::sys::read_request(&mut buf) == 0;
        finish(read.then_some(&buf[..]), handler)
    }

    /// [`serve`], with the body left in the host as blob 0.
    pub fn serve_head(request_len: u32, handler: fn(&Request<'_>) -> Response) -> u64 {
        // The head is at most the whole request, and nearly always a few hundred bytes.
        let mut buf = vec![0u8; (request_len as usize).min(4096)];
        let mut n = crate::sys::read_head(&mut buf);
        if n as usize > buf.len() {
            buf = vec![0u8; n as usize];
            n = crate::sys::read_head(&mut buf);
        }
        finish(buf.get(..usize::try_from(n).unwrap_or(usize::MAX)), handler)
    }

    /// Runs the handler on the request buffer (`None`: the host would not give it), and
    /// returns the packed outcome.
    fn finish(buf: Option<&[u8]>, handler: fn(&Request<'_>) -> Response) -> u64 {
        let response = match buf.map(Request::parse) {
            None => Response::error(ErrorCode::BadRequestBuffer, "reading the request failed"),
            Some(Ok(req)) => handler(&req),
            Some(Err(_)) => {
                Response::error(ErrorCode::BadRequestBuffer, "malformed request buffer")
            }
        };
        let outcome = response.into_bytes();
        let packed = edgegate_abi::pack_outcome(outcome.as_ptr() as u32, outcome.len() as u32);
        // The buffer must outlive this call: the host reads it after we return. The instance
        // is dropped after that, so this is not a leak.
        core::mem::forget(outcome);
        packed
    }
}
