//! `image_probe` and `image_transform`: pictures decoded, resized and encoded by the host's
//! native code (`edgegate-image`), on the runtime's image threads, by blob handle, so a
//! picture need not pass through guest memory.

use std::future::Future;

use edgegate_abi::HostError;
use edgegate_abi::image::TransformSpec;
use edgegate_image::{Budget, Error, Plan};
use tracing::Instrument;
use wasmtime::Caller;

use super::{enter, guest_try, hostcall_span, slice, slice_mut};
use crate::core_abi::request::RequestState;
use crate::guest::escape::escape_control;
use crate::limits::meter::Stop;

/// What the guest gets for a picture the host refused.
fn host_error(error: &Error) -> HostError {
    match error {
        Error::Invalid(_) => HostError::InvalidImage,
        Error::TooManyPixels { .. }
        | Error::TooManyScans { .. }
        | Error::TooMuchWork { .. }
        | Error::OutputTooLarge { .. } => HostError::LimitExceeded,
        Error::BadCrop(..) => HostError::InvalidArgument,
        Error::OverBudget { .. } | Error::Deadline => HostError::Timeout,
    }
}

pub(super) fn image_probe(
    mut caller: Caller<'_, RequestState>,
    blob: u32,
    out_ptr: u32,
) -> wasmtime::Result<i32> {
    let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
    guest_try!(if state.worker.image.is_none(), HostError::NotGranted);
    let bytes = guest_try!(state.blob(blob), HostError::NotFound);
    let info = match edgegate_image::probe(bytes) {
        Ok(info) => info,
        Err(e) => return Ok(host_error(&e).code()),
    };
    let out = guest_try!(
        slice_mut(data, out_ptr, edgegate_abi::image::ImageInfo::LEN as u32),
        HostError::InvalidArgument
    );
    out.copy_from_slice(&info.encode());
    Ok(0)
}

pub(super) fn image_transform<'a>(
    mut caller: Caller<'a, RequestState>,
    (blob, spec_ptr, spec_len): (u32, u32, u32),
) -> Box<dyn Future<Output = wasmtime::Result<i32>> + Send + 'a> {
    let span = hostcall_span!("image", "transform");
    Box::new(Instrument::instrument(
        async move {
            let (data, state) = guest_try!(enter(&mut caller)?, HostError::InvalidArgument);
            let image = guest_try!(state.worker.image.clone(), HostError::NotGranted);
            let spec = guest_try!(
                slice(data, spec_ptr, spec_len).and_then(|buf| TransformSpec::parse(buf).ok()),
                HostError::InvalidArgument
            );
            let bytes = guest_try!(state.blob(blob).cloned(), HostError::NotFound);
            let limits = image.grant.limits;
            // From the header and markers alone: the pixel and scan caps, the crop, what it
            // will hold, and whether its decoding can end within the request's CPU time and
            // deadline (it cannot be stopped once started).
            let plan = Plan::of(&bytes, &spec, &limits)
                .and_then(|plan| plan.fits(&budget(state)).map(|()| plan));
            let plan = match plan {
                Ok(plan) => plan,
                Err(e) => return Ok(refused(state, &e)),
            };
            let Some(held) = image.hold(plan.memory()).await else {
                let state = caller.data();
                tracing::debug!(
                    worker = %state.worker.name,
                    request_id = %state.request_id,
                    "image refused: needs {} bytes of image memory, more than the worker's {}",
                    plan.memory(),
                    image.grant.memory
                );
                return Ok(HostError::LimitExceeded.code());
            };
            let state = caller.data_mut();
            // Waiting for memory or a thread may have taken the request's time: then no
            // thread starts work that would outlast it.
            let budget = budget(state);
            if let Err(e) = plan.fits(&budget) {
                state.meter.stop = Some(Stop::Deadline);
                return Err(wasmtime::format_err!(
                    "image transform not started after waiting: {e}"
                ));
            }
            let work = tokio::task::spawn_blocking(move || {
                let done = edgegate_image::transform(&bytes, &spec, &limits, &budget);
                drop(held);
                done
            });
            let (result, cpu) = match work.await {
                Ok(done) => done,
                Err(e) => return Err(wasmtime::format_err!("the image task failed: {e}")),
            };
            let state = caller.data_mut();
            state.offloaded_cpu += cpu;
            let stop = match &result {
                Err(Error::Deadline) => Some(Stop::Deadline),
                Err(Error::OverBudget { .. }) => Some(Stop::Cpu),
                _ if state.cpu_used() > state.worker.limits.cpu => Some(Stop::Cpu),
                _ => None,
            };
            if let Some(stop) = stop {
                state.meter.stop = Some(stop);
                return Err(wasmtime::format_err!(
                    "image transform stopped: {stop:?} after {cpu:?} of CPU"
                ));
            }
            match result {
                Ok(output) => Ok(state.add_blob(output.bytes.into())),
                Err(e) => Ok(refused(state, &e)),
            }
        },
        span,
    ))
}

/// What the request has left for image work: CPU time and time to its deadline.
fn budget(state: &RequestState) -> Budget {
    let cpu = state.worker.limits.cpu.saturating_sub(state.cpu_used());
    Budget { cpu, deadline: state.deadline() }
}

/// Logs why a picture was refused and returns the guest's code.
fn refused(state: &RequestState, error: &Error) -> i32 {
    tracing::debug!(worker = %state.worker.name, request_id = %state.request_id, "image refused: {}", escape_control(&error.to_string()));
    host_error(error).code()
}
