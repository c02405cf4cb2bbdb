//! `fetch_start` and `fetch_wait`: outbound HTTP through the worker's [`crate::capability::fetch::Fetcher`].

use std::future::Future;

use bytes::Bytes;
use edgegate_abi::HostError;
use edgegate_abi::outcome::ResponseWriter;
use edgegate_abi::request::RequestView;
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use tracing::Instrument;
use wasmtime::Caller;

use super::{answer, enter, guest_try, hostcall_span, kept, slice};
use crate::capability::fetch::FetchError;
use crate::core_abi::request::{KeptCall, RequestState};
use crate::guest::escape::escape_control;

/// Decodes a guest's fetch request.
fn decode(buf: &[u8]) -> Result<Request<Bytes>, FetchError> {
    let invalid = |what: &str| FetchError::Invalid(what.to_owned());
    let view = RequestView::parse(buf).map_err(|e| FetchError::Invalid(e.to_string()))?;
    let method = Method::from_bytes(view.method().as_bytes()).map_err(|_| invalid("method"))?;
    let uri: Uri = view.target().parse().map_err(|_| invalid("URL"))?;
    if uri.scheme().is_none() || uri.authority().is_none() {
        return Err(invalid("the URL must be absolute: scheme://host/path"));
    }
    let mut request = Request::new(Bytes::copy_from_slice(view.body()));
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    let headers = request.headers_mut();
    for (name, value) in view.headers().iter() {
        let name = HeaderName::from_bytes(name).map_err(|_| invalid("header name"))?;
        let value = HeaderValue::from_bytes(value).map_err(|_| invalid("header value"))?;
        headers.append(name, value);
    }
    Ok(request)
}

pub(super) fn fetch_start(
    mut caller: Caller<'_, RequestState>,
    req_ptr: u32,
    req_len: u32,
) -> wasmtime::Result<i32> {
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    let fetcher = guest_try!(state.worker.fetcher.clone(), HostError::NotGranted);
    if state.fetches.started >= state.worker.limits.subrequests {
        fetcher.over_cap();
        return Ok(HostError::LimitExceeded.code());
    }
    let buf = guest_try!(slice(data, req_ptr, req_len), HostError::InvalidArgument);
    let started =
        decode(buf).and_then(|request| fetcher.start(request, state.worker.limits.subrequest_body));
    match started {
        Ok(future) => {
            state.fetches.started += 1;
            let handle = state.fetches.pending.len() as i32;
            let future = future.instrument(hostcall_span!("fetch", "request"));
            state.fetches.pending.push(Some(tokio::spawn(future)));
            Ok(handle)
        }
        Err(e) => {
            tracing::debug!(worker = %state.worker.name, request_id = %state.request_id, "fetch refused: {}", escape_control(&e.to_string()));
            Ok(e.host_error().code())
        }
    }
}

/// A response as the guest reads it: a response outcome buffer.
fn encode(response: http::Response<Bytes>) -> Bytes {
    let (parts, body) = response.into_parts();
    let headers_len: usize =
        parts.headers.iter().map(|(n, v)| 8 + n.as_str().len() + v.len()).sum();
    let mut writer = ResponseWriter::with_capacity(parts.status.as_u16(), headers_len + body.len());
    for (name, value) in &parts.headers {
        writer.header(name.as_str().as_bytes(), value.as_bytes());
    }
    writer.finish(&body).into()
}

pub(super) fn fetch_wait<'a>(
    mut caller: Caller<'a, RequestState>,
    (handle, out_ptr, out_cap): (u32, u32, u32),
) -> Box<dyn Future<Output = wasmtime::Result<i32>> + Send + 'a> {
    let span = hostcall_span!("fetch", "wait");
    Box::new(Instrument::instrument(
        async move {
            guest_try!(if enter(&mut caller)?.is_none(), HostError::InvalidArgument);
            let id = handle.to_le_bytes();
            let is_same =
                |_: &[u8], call: &KeptCall| call.matches(KeptCall::FETCH, Some(b""), Some(&id));
            if let Some((call, response)) = kept(&mut caller, is_same) {
                return Ok(answer(&mut caller, |_, _| call, response, out_ptr, out_cap));
            }
            let state = caller.data_mut();
            let task = guest_try!(
                state.fetches.pending.get_mut(handle as usize).and_then(Option::take),
                HostError::InvalidArgument
            );
            let result = match task.await {
                Ok(result) => result,
                Err(e) => Err(FetchError::Unavailable(format!("the fetch task failed: {e}"))),
            };
            match result {
                Ok(response) => {
                    let call = |_: &[u8], _: &RequestState| KeptCall::new(KeptCall::FETCH, "", &id);
                    Ok(answer(&mut caller, call, encode(response), out_ptr, out_cap))
                }
                Err(e) => {
                    let state = caller.data();
                    tracing::debug!(worker = %state.worker.name, request_id = %state.request_id, "fetch failed: {}", escape_control(&e.to_string()));
                    Ok(e.host_error().code())
                }
            }
        },
        span,
    ))
}
