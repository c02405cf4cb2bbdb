//! Workers called without a fiber: a module that imports no host function that may wait, with
//! a CPU budget of at most `MAX_FIBERLESS_CPU`, is instantiated and called directly on the
//! runtime thread. Its whole request then ends within the first poll of its future, and the
//! epoch ticks must still stop it at its CPU budget and its deadline, since nothing else can.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use super::*;

/// A module whose handler loops forever; with `start`, so does its start function.
fn spinner(start: bool) -> Vec<u8> {
    let start = if start { "(start $spin)" } else { "" };
    wat::parse_str(format!(
        r#"(module
             (import "edgegate_v1" "clock_monotonic" (func $clock (result i64)))
             (memory (export "memory") 1)
             (func $spin (loop $l (br $l)))
             {start}
             (func (export "edgegate_v1_handle") (param i32) (result i64)
               (call $spin)
               (i64.const 0)))"#
    ))
    .unwrap()
}

fn limits(cpu_ms: u64, deadline_ms: u64) -> Limits {
    Limits {
        cpu: Duration::from_millis(cpu_ms),
        deadline: Duration::from_millis(deadline_ms),
        ..Limits::default()
    }
}

/// The request's first poll: `Ready` when it never suspended.
fn first_poll<F: Future>(call: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    call.poll(&mut Context::from_waker(Waker::noop()))
}

fn stopped_as(poll: Poll<Result<GuestOutcome, ExecError>>) -> ExecErrorKind {
    match poll {
        Poll::Ready(Err(e)) => e.kind(),
        Poll::Ready(Ok(outcome)) => panic!("expected a stop, got {outcome:?}"),
        Poll::Pending => panic!("the request suspended: it ran on a fiber"),
    }
}

#[tokio::test]
async fn without_a_fiber_the_cpu_budget_still_stops_a_spinning_guest() {
    let worker = load_bytes(&spinner(false), limits(5, 1000), &[]).unwrap();
    let mut call = std::pin::pin!(worker.handle(get("/"), RequestId(1)));
    assert_eq!(stopped_as(first_poll(call.as_mut())), ExecErrorKind::CpuBudgetExceeded);
}

#[tokio::test]
async fn without_a_fiber_the_deadline_still_stops_a_spinning_guest() {
    let worker = load_bytes(&spinner(false), limits(10, 3), &[]).unwrap();
    let mut call = std::pin::pin!(worker.handle(get("/"), RequestId(1)));
    assert_eq!(stopped_as(first_poll(call.as_mut())), ExecErrorKind::DeadlineExceeded);
}

#[tokio::test]
async fn without_a_fiber_a_spinning_start_function_is_stopped_by_the_cpu_budget() {
    let worker = load_bytes(&spinner(true), limits(5, 1000), &[]).unwrap();
    let mut call = std::pin::pin!(worker.handle(get("/"), RequestId(1)));
    assert_eq!(stopped_as(first_poll(call.as_mut())), ExecErrorKind::CpuBudgetExceeded);
}

#[tokio::test]
async fn a_long_cpu_budget_or_an_import_that_may_wait_keeps_the_fiber() {
    // Over MAX_FIBERLESS_CPU: the guest yields at its first tick, and is stopped later.
    let long = load_bytes(&spinner(false), limits(20, 1000), &[]).unwrap();
    let mut call = std::pin::pin!(long.handle(get("/"), RequestId(1)));
    assert!(first_poll(call.as_mut()).is_pending());
    assert_eq!(call.await.unwrap_err().kind(), ExecErrorKind::CpuBudgetExceeded);
    // The hostile guest imports the KV calls, which may wait.
    let hostile = hostile();
    let mut call = std::pin::pin!(hostile.handle(get("/loop"), RequestId(1)));
    assert!(first_poll(call.as_mut()).is_pending());
    assert_eq!(call.await.unwrap_err().kind(), ExecErrorKind::CpuBudgetExceeded);
    still_serves(&hostile).await;
}

/// The direct path serves a real worker: echo-json imports nothing that may wait.
#[tokio::test]
async fn echo_json_answers_without_a_fiber() {
    let worker = load_bytes(guests::ECHO_JSON, Limits::default(), &[]).unwrap();
    let mut request = get("/echo");
    request.method = http::Method::POST;
    request.body = bytes::Bytes::from_static(br#"{"a":1}"#);
    let mut call = std::pin::pin!(worker.handle(request, RequestId(1)));
    match first_poll(call.as_mut()) {
        Poll::Ready(Ok(GuestOutcome::Response(r))) => assert_eq!(r.status(), 200),
        Poll::Ready(other) => panic!("{other:?}"),
        Poll::Pending => panic!("echo-json suspended"),
    }
}
