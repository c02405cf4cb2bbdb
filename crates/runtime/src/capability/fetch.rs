//! Outbound HTTP for workers: the interface the gateway implements.
//!
//! The runtime decodes a guest's `fetch_start`, counts it against the worker's subrequest cap
//! and hands the request to the worker's [`Fetcher`], which checks the destination against the
//! worker's allow-list and returns the request's future; the runtime runs it as its own task,
//! so several fetches of one request proceed concurrently while the guest goes on, and the
//! guest's `fetch_wait` waits for it without being charged CPU time. A request that ends
//! (answered, trapped, timed out) aborts the fetches it did not wait for.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

/// A fetch in flight.
pub type FetchFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Bytes>, FetchError>> + Send + 'static>>;

/// Makes a worker's outbound requests. One per worker: it knows the worker's allow-list.
pub trait Fetcher: Send + Sync + std::fmt::Debug {
    /// Checks `request` (an absolute URI: `http`, `https` or `upstream://NAME`) against the
    /// allow-list and starts it. The response body must be read whole, at most `max_body`
    /// bytes.
    fn start(
        &self,
        request: http::Request<Bytes>,
        max_body: u64,
    ) -> Result<FetchFuture, FetchError>;

    /// Told when a request is refused because the guest's request already started its
    /// `subrequests` (nothing is sent): for counting.
    fn over_cap(&self) {}
}

/// Why a fetch failed. Each is one [`edgegate_abi::HostError`] code for the guest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The worker may not reach this scheme, host and port (or upstream): `NotGranted`.
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// The request is malformed (not an absolute URL, a bad header): `InvalidArgument`.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// No connection, or not a valid HTTP response: `Unavailable`.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Connecting or waiting for the response took too long: `Timeout`.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The response body is larger than the worker may receive: `LimitExceeded`.
    #[error("response body over {0} bytes")]
    TooLarge(u64),
}

impl FetchError {
    /// The guest's error code.
    pub fn host_error(&self) -> edgegate_abi::HostError {
        use edgegate_abi::HostError;
        match self {
            Self::NotAllowed(_) => HostError::NotGranted,
            Self::Invalid(_) => HostError::InvalidArgument,
            Self::Unavailable(_) => HostError::Unavailable,
            Self::Timeout(_) => HostError::Timeout,
            Self::TooLarge(_) => HostError::LimitExceeded,
        }
    }
}
