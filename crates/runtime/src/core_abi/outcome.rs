//! A core module's outcome, decoded from the bytes its `edgegate_v1_handle` returns, and
//! checked by the rules both ABIs share ([`crate::outcome`]).

use bytes::Bytes;
use edgegate_abi::outcome::{EditOp, ErrorCode, Outcome as AbiOutcome};

use crate::error::{ExecError, ExecErrorKind};
use crate::guest::{Forward, GuestOutcome, GuestRequest, HeaderEdit};
use crate::limits::Limits;
use crate::outcome::{connection_header, header_name, header_value, response};

/// The core ABI's outcome in `bytes`, checked; `take_blob` finds a body the host holds.
pub(crate) fn decode(
    bytes: &[u8],
    take_blob: impl FnOnce(u32) -> Option<Bytes>,
    limits: &Limits,
) -> Result<GuestOutcome, ExecError> {
    let abi = |detail: String| ExecError::new(ExecErrorKind::AbiViolation, detail);
    match AbiOutcome::parse(bytes).map_err(|e| abi(format!("malformed outcome: {e}")))? {
        AbiOutcome::Response { status, headers, body } => {
            response(status, headers, limits, body.len(), || Bytes::copy_from_slice(body))
                .map(GuestOutcome::Response)
        }
        AbiOutcome::BlobResponse { status, headers, blob } => {
            let body = take_blob(blob).ok_or_else(|| {
                abi(format!("the response's body is blob {blob}, which does not exist"))
            })?;
            response(status, headers, limits, body.len(), || body).map(GuestOutcome::Response)
        }
        AbiOutcome::Forward { upstream, edits } => {
            let edits = edits
                .iter()
                .map(|(op, name, value)| {
                    let name = header_name(name)?;
                    let edit = match op {
                        EditOp::Remove => return Ok(HeaderEdit::Remove(name)),
                        EditOp::Set => HeaderEdit::Set,
                        EditOp::Append => HeaderEdit::Append,
                    };
                    connection_header(&name)?;
                    let value = header_value(&name, value)?;
                    Ok(edit(name, value))
                })
                .collect::<Result<_, ExecError>>()?;
            Ok(GuestOutcome::Forward(Forward {
                upstream: upstream.to_owned(),
                edits,
                request: GuestRequest::default(),
            }))
        }
        AbiOutcome::Error { code, message } => {
            let kind = match code {
                ErrorCode::Unavailable => ExecErrorKind::WorkerUnavailable,
                ErrorCode::Internal | ErrorCode::BadRequestBuffer => ExecErrorKind::WorkerFailed,
            };
            Err(ExecError::new(kind, format!("{code:?}: {message}")))
        }
    }
}
