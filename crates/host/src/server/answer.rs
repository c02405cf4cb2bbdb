//! The admin listener's JSON answers.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;

/// A JSON answer with `status`.
pub(super) fn json(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    response
}
