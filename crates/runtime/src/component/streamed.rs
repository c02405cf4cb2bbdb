//! A component's answer streamed to the client: what the guest wrote past the buffer, read as
//! it writes it, within the worker's `response_body` limit and its deadline. It ends only when
//! the guest's call has ended well: a trap, a limit or an unfinished body after the head was
//! sent is an error frame, so the connection is cut (a chunked answer without its last chunk,
//! an HTTP/2 reset), never a clean end to a truncated answer.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use crate::error::{ExecError, ExecErrorKind};
use crate::guest::RequestId;
use crate::limits::usage::{Progress, Usage};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How the guest's task ends: its result and what it cost.
pub(crate) type Finished = (Result<(), ExecError>, Usage);

/// The guest's task, aborted when the body is dropped (a client that goes away takes the
/// instance with it).
pub(crate) struct Task(pub(crate) tokio::task::JoinHandle<Finished>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The rest of a component's answer, after the buffered prefix.
pub(crate) struct ComponentBody {
    prefix: Option<Bytes>,
    body: HyperOutgoingBody,
    task: Task,
    deadline: Pin<Box<tokio::time::Sleep>>,
    /// Bytes the body may still carry under `response_body`.
    room: u64,
    limit: u64,
    worker: std::sync::Arc<str>,
    request_id: RequestId,
    /// What the guest has used, and why the answer was cut if it was.
    progress: std::sync::Arc<Progress>,
    done: bool,
    /// The body failed: waiting for the guest's own outcome, which says why.
    broken: Option<String>,
}

impl std::fmt::Debug for ComponentBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentBody").field("worker", &self.worker).finish_non_exhaustive()
    }
}

/// Whose answer a [`ComponentBody`] streams, and within which bounds.
pub(crate) struct Streaming {
    /// The request's deadline.
    pub(crate) deadline: Instant,
    /// The worker's `response_body`.
    pub(crate) limit: u64,
    pub(crate) worker: std::sync::Arc<str>,
    pub(crate) request_id: RequestId,
    /// What the guest has used, told as it happens.
    pub(crate) progress: std::sync::Arc<Progress>,
}

impl ComponentBody {
    pub(crate) fn new(prefix: Bytes, body: HyperOutgoingBody, task: Task, of: Streaming) -> Self {
        let room = of.limit.saturating_sub(prefix.len() as u64);
        Self {
            prefix: Some(prefix),
            body,
            task,
            deadline: Box::pin(tokio::time::sleep_until(of.deadline.into())),
            room,
            limit: of.limit,
            worker: of.worker,
            request_id: of.request_id,
            progress: of.progress,
            done: false,
            broken: None,
        }
    }

    /// Ends the stream with `error`, logged: the client's connection is cut.
    fn fail(&mut self, error: ExecError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.done = true;
        self.task.0.abort();
        let _ = self.progress.cut.set(error.kind());
        tracing::warn!(
            target: "edgegate::guest",
            worker = %self.worker,
            request_id = %self.request_id,
            error = error.kind().code(),
            detail = error.detail(),
            "the component failed after its answer started: the answer was cut off"
        );
        Poll::Ready(Some(Err(Box::new(error))))
    }
}

impl Body for ComponentBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(prefix) = this.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            let error = ExecError::new(
                ExecErrorKind::DeadlineExceeded,
                "the answer was still streaming at the deadline",
            );
            return this.fail(error);
        }
        if this.broken.is_none() {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    let len = frame.data_ref().map_or(0, |data| data.len() as u64);
                    if len > this.room {
                        let error = ExecError::new(
                            ExecErrorKind::ResponseTooLarge,
                            format!("over {} bytes, streamed", this.limit),
                        );
                        return this.fail(error);
                    }
                    this.room -= len;
                    return Poll::Ready(Some(Ok(frame)));
                }
                // The guest's failure (a trap aborts its body) says more than the body's.
                Poll::Ready(Some(Err(error))) => this.broken = Some(error.to_string()),
                Poll::Ready(None) => {}
            }
        }
        // The guest wrote its last byte: the answer is whole only if its call ends well.
        let finished = ready!(Pin::new(&mut this.task.0).poll(cx));
        if let (Some(broken), Ok((Ok(()), _))) = (this.broken.take(), &finished) {
            let error = ExecError::new(
                ExecErrorKind::WorkerFailed,
                format!("the response body failed: {broken}"),
            );
            return this.fail(error);
        }
        match finished {
            Ok((Ok(()), usage)) => {
                this.done = true;
                tracing::debug!(
                    target: "edgegate::guest",
                    worker = %this.worker,
                    request_id = %this.request_id,
                    cpu_us = usage.cpu.as_micros() as u64,
                    memory_peak = usage.memory_peak,
                    "streamed answer complete"
                );
                Poll::Ready(None)
            }
            Ok((Err(error), _)) => this.fail(error),
            Err(join) => this
                .fail(ExecError::new(ExecErrorKind::Internal, format!("the guest's task: {join}"))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
