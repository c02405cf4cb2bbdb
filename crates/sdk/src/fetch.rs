//! Outbound HTTP requests to the upstreams and hosts the gateway's configuration allows this
//! worker.
//!
//! [`start`] sends at once and returns a [`Pending`]; several run concurrently, and
//! [`Pending::wait`] collects each (the wait is not charged to the CPU budget):
//!
//! ```no_run
//! use edgegate_sdk::fetch::{self, FetchRequest};
//! let a = fetch::start(&FetchRequest::get("upstream://service-a/profile"))?;
//! let b = fetch::start(&FetchRequest::get("https://api.example.com/v1/prices"))?;
//! let (a, b) = (a.wait()?, b.wait()?);
//! assert_eq!(a.status(), 200);
//! let _merged = [a.body(), b.body()];
//! # Ok::<(), edgegate_sdk::HostError>(())
//! ```
//!
//! A URL is `http://host[:port]/path`, `https://…`, or `upstream://NAME/path` for an upstream
//! the worker is granted. Errors: [`HostError::NotGranted`] (not allowed),
//! [`HostError::LimitExceeded`] (the subrequest cap, or a response body over the worker's
//! cap), [`HostError::Unavailable`] (no connection, a bad response), [`HostError::Timeout`],
//! [`HostError::InvalidArgument`] (a malformed request).

use alloc::vec;
use alloc::vec::Vec;

use edgegate_abi::HostError;
use edgegate_abi::outcome::Outcome;
use edgegate_abi::request::{self, RequestParts};

use crate::host::{read_answer, status};
use crate::sys;

/// An outbound request.
#[derive(Debug, Clone, Copy)]
pub struct FetchRequest<'a> {
    /// The method.
    pub method: &'a str,
    /// The absolute URL.
    pub url: &'a str,
    /// Header `(name, value)` pairs.
    pub headers: &'a [(&'a [u8], &'a [u8])],
    /// The body.
    pub body: &'a [u8],
}

impl<'a> FetchRequest<'a> {
    /// A `GET` of `url` with no headers.
    pub const fn get(url: &'a str) -> Self {
        Self { method: "GET", url, headers: &[], body: &[] }
    }
}

/// A fetch in flight.
#[derive(Debug)]
#[must_use = "a fetch's answer is only read by waiting for it"]
pub struct Pending(i32);

/// Sends `request` and returns at once.
pub fn start(request: &FetchRequest<'_>) -> Result<Pending, HostError> {
    let parts = RequestParts {
        method: request.method,
        target: request.url,
        authority: "",
        headers: request.headers,
        body: request.body,
        tls: false,
        body_held: false,
    };
    let len = request::encoded_len(&parts).ok_or(HostError::LimitExceeded)?;
    let mut buf = vec![0u8; len];
    request::encode(&parts, &mut buf).map_err(|_| HostError::InvalidArgument)?;
    status(sys::fetch_begin(&buf)).map(|handle| Pending(handle as i32))
}

/// Sends `request` and waits for its response.
pub fn fetch(request: &FetchRequest<'_>) -> Result<FetchResponse, HostError> {
    start(request)?.wait()
}

impl Pending {
    /// Waits for the response.
    pub fn wait(self) -> Result<FetchResponse, HostError> {
        let buf = read_answer(4096, |out| sys::fetch_end(self.0, out))?;
        match Outcome::parse(&buf) {
            Ok(Outcome::Response { .. }) => Ok(FetchResponse { buf }),
            _ => Err(HostError::InvalidArgument),
        }
    }
}

/// A fetched response: status, headers and the whole body, in the arena.
#[derive(Debug, Clone)]
pub struct FetchResponse {
    buf: Vec<u8>,
}

impl FetchResponse {
    fn parts(&self) -> Option<(u16, edgegate_abi::HeaderBlock<'_>, &[u8])> {
        // Checked to be a response in `wait`.
        match Outcome::parse(&self.buf).ok()? {
            Outcome::Response { status, headers, body } => Some((status, headers, body)),
            _ => None,
        }
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.parts().map_or(0, |(status, _, _)| status)
    }

    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.parts()?.1.get(name)
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        self.parts().map_or(&[], |(_, _, body)| body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natively_nothing_is_granted() {
        assert_eq!(
            start(&FetchRequest::get("http://example.com/")).map(drop),
            Err(HostError::NotGranted)
        );
    }
}
