//! What a guest answers, checked by the rules both ABIs share ([`response`]: the status, the
//! headers a worker may set, the response size). The core ABI's outcome is decoded from its
//! bytes in [`crate::core_abi::outcome`].

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::error::{ExecError, ExecErrorKind};
use crate::limits::Limits;

/// Headers a worker may not set, on a response or a forwarded request: they describe the
/// connection or the message framing, which the gateway owns. A worker that sets one gets
/// `invalid_response`, not a quiet fix. `content-length` is the exception on a response: one
/// that equals the body's length is what the gateway would send anyway, so it is accepted
/// (and the gateway's own is sent).
const CONNECTION_HEADERS: [HeaderName; 8] = [
    http::header::CONNECTION,
    http::header::CONTENT_LENGTH,
    http::header::TRANSFER_ENCODING,
    http::header::TE,
    http::header::TRAILER,
    http::header::UPGRADE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

/// The statuses a worker may answer with. 1xx are interim responses (and 101 would switch
/// protocols without an upgrade), not answers; above 599 is not HTTP.
const WORKER_STATUSES: std::ops::RangeInclusive<u16> = 200..=599;

/// A checked response: status, headers, and a body of `len` bytes made by `body` once the
/// rest is known to be good. A component's answer is checked by the same rules.
pub(crate) fn response<'h>(
    status: u16,
    headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
    limits: &Limits,
    len: usize,
    body: impl FnOnce() -> Bytes,
) -> Result<http::Response<Bytes>, ExecError> {
    if len as u64 > limits.response_body {
        return Err(ExecError::new(
            ExecErrorKind::ResponseTooLarge,
            format!("{len} bytes, limit {}", limits.response_body),
        ));
    }
    if !WORKER_STATUSES.contains(&status) {
        return Err(invalid(format!("status {status}: a worker answers 200 to 599")));
    }
    let status = StatusCode::from_u16(status).map_err(|e| invalid(e.to_string()))?;
    let headers = headers.into_iter();
    let mut map = HeaderMap::with_capacity(headers.size_hint().0);
    for (name, value) in headers {
        let name = header_name(name)?;
        let value = header_value(&name, value)?;
        if name == http::header::CONTENT_LENGTH {
            if value.as_bytes() != len.to_string().as_bytes() {
                return Err(invalid(format!(
                    "content-length {:?} for a body of {len} bytes",
                    String::from_utf8_lossy(value.as_bytes()),
                )));
            }
            continue;
        }
        connection_header(&name)?;
        map.append(name, value);
    }
    let mut response = http::Response::new(body());
    *response.status_mut() = status;
    *response.headers_mut() = map;
    Ok(response)
}

fn invalid(detail: String) -> ExecError {
    ExecError::new(ExecErrorKind::InvalidResponse, detail)
}

pub(crate) fn header_name(name: &[u8]) -> Result<HeaderName, ExecError> {
    HeaderName::from_bytes(name)
        .map_err(|_| invalid(format!("bad header name {:?}", String::from_utf8_lossy(name))))
}

/// Refuses a connection or framing header (see [`CONNECTION_HEADERS`]).
pub(crate) fn connection_header(name: &HeaderName) -> Result<(), ExecError> {
    if CONNECTION_HEADERS.contains(name) {
        return Err(invalid(format!("header {name} is the gateway's to set")));
    }
    Ok(())
}

/// A value with no CR, LF, NUL or other control character but tab (`HeaderValue`'s rule).
pub(crate) fn header_value(name: &HeaderName, value: &[u8]) -> Result<HeaderValue, ExecError> {
    HeaderValue::from_bytes(value).map_err(|_| invalid(format!("bad value for header {name}")))
}
