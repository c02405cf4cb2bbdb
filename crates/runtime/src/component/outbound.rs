//! A component's outbound requests (`wasi:http/outgoing-handler`) are edgegate fetches:
//! wasi-http is built without its own client, and [`Outbound::send_request`] hands each
//! request to the worker's [`Fetcher`], with the same allow-list (checked on the URL's host
//! before any connection, so a name is never resolved for a destination that is not
//! allowed), subrequest cap, body caps, timeouts and connection pools as a module's
//! `fetch_start`.
//!
//! Besides `http` and `https`, the scheme `upstream` is supported (`upstream://NAME/path`, as
//! `Scheme::Other("upstream")` in the guest's bindings): a granted upstream, through its pool,
//! exactly as a module's `fetch` reaches it.
//!
//! ```text
//!  guest: outgoing-handler.handle(req) ─▶ send_request ─▶ cap? ─▶ body ≤ cap ─▶ Fetcher::start
//!                                            │ over: connection-limit-reached      │ not allowed:
//!  guest: future-incoming-response.get ◀─────┴────────────────────────────────────┘ http-request-denied
//! ```

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::capability::fetch::{FetchError, Fetcher};
use crate::limits::usage::Progress;

/// One request's outbound side: the worker's fetcher and what is left of its caps.
pub(crate) struct Outbound {
    fetcher: Option<Arc<dyn Fetcher>>,
    /// Requests still allowed (the worker's `subrequests`).
    left: u32,
    /// The most bytes an outgoing request's body or a response's body may have.
    max_body: u64,
    /// Where each request started is counted.
    progress: Arc<Progress>,
}

impl Outbound {
    pub(crate) fn new(
        fetcher: Option<Arc<dyn Fetcher>>,
        subrequests: u32,
        max_body: u64,
        progress: Arc<Progress>,
    ) -> Self {
        Self { fetcher, left: subrequests, max_body, progress }
    }
}

/// The rest of an exchange after its head: nothing, since fetch reads the body whole.
type Io = Box<dyn Future<Output = Result<(), Error>> + Send>;

/// What `send_request` returns: the response, once it is there.
type Sent = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Io), Error>> + Send>;

/// The scheme of a fetch to a granted upstream.
const UPSTREAM: &str = "upstream";

impl WasiHttpHooks for Outbound {
    fn is_supported_scheme(&mut self, scheme: &http::uri::Scheme) -> bool {
        *scheme == http::uri::Scheme::HTTP
            || *scheme == http::uri::Scheme::HTTPS
            || scheme.as_str().eq_ignore_ascii_case(UPSTREAM)
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Sent {
        let refused = |error: Error| -> Sent { Box::new(async move { Err(error) }) };
        let Some(fetcher) = self.fetcher.clone() else {
            return refused(Error::HttpRequestDenied);
        };
        let Some(left) = self.left.checked_sub(1) else {
            fetcher.over_cap();
            return refused(Error::ConnectionLimitReached);
        };
        self.left = left;
        self.progress.fetches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let max_body = self.max_body;
        Box::new(async move {
            let (parts, body) = request.into_parts();
            let limit = usize::try_from(max_body).unwrap_or(usize::MAX);
            let body = Limited::new(body, limit)
                .collect()
                .await
                .map_err(|_| Error::HttpRequestBodySize(None))?
                .to_bytes();
            let future =
                fetcher.start(http::Request::from_parts(parts, body), max_body).map_err(error)?;
            let response = future.await.map_err(error)?;
            let response = response
                .map(|body: Bytes| Full::new(body).map_err(|never| match never {}).boxed_unsync());
            let io: Io = Box::new(async { Ok(()) });
            Ok((response, io))
        })
    }
}

/// The wasi-http error a failed fetch is to the guest.
fn error(error: FetchError) -> Error {
    match error {
        FetchError::NotAllowed(_) => Error::HttpRequestDenied,
        FetchError::Invalid(_) => Error::HttpRequestUriInvalid,
        FetchError::Unavailable(_) => Error::DestinationUnavailable,
        FetchError::Timeout(_) => Error::ConnectionTimeout,
        FetchError::TooLarge(limit) => Error::HttpResponseBodySize(Some(limit)),
    }
}
