//! Measuring the CPU time a request's guest code consumes.
//!
//! A request's guest runs only while the future that drives it is being polled: on a Wasmtime
//! fiber, on whichever tokio worker thread polls it. [`metered`] wraps the future of the
//! guest's entry-point call (not the instantiation before it, which is the gateway's work) and
//! reads the thread CPU clock around each poll; the sum over polls is the request's CPU time.
//! Between polls (waiting for an async host call, after a yield, while other tasks run on the
//! thread) nothing is charged. The epoch callback, which runs on the same thread inside a poll,
//! asks [`used`] for the total so far.
//!
//! ```text
//!   poll 1                  pending (not charged)          poll 2
//! ├──────────┤ · · · · · · · · · · · · · · · · · · ·├───────────────┤
//! cpu₀      cpu₁                                    cpu₂ ── tick ── epoch callback:
//! charged = cpu₁ − cpu₀                                  used = charged + (now − cpu₂)
//! ```
//!
//! Each poll costs two reads of the thread CPU clock (a system call, ~0.2 µs here): when it
//! starts and when it ends. The total is the request's guest CPU time in logs and metrics.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

#[derive(Clone, Copy)]
struct Slice {
    /// Thread CPU time when the current poll started.
    started: Duration,
    /// CPU time charged by earlier polls of the same request.
    before: Duration,
}

thread_local! {
    /// The poll in progress on this thread, if it is a metered guest's.
    static SLICE: Cell<Option<Slice>> = const { Cell::new(None) };
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Drives `future`, charging the CPU time of each poll to it, so that [`used`] can tell inside a
/// poll how much the future has consumed; returns its output and the CPU time it used in all.
pub(crate) async fn metered<F: Future>(mut future: Pin<&mut F>) -> (F::Output, Duration) {
    let mut charged = Duration::ZERO;
    std::future::poll_fn(move |cx| {
        let started = thread_cpu();
        let previous = SLICE.replace(Some(Slice { started, before: charged }));
        let poll = future.as_mut().poll(cx);
        SLICE.set(previous);
        charged += thread_cpu().saturating_sub(started);
        poll.map(|output| (output, charged))
    })
    .await
}

/// The CPU time the guest being polled on this thread has used so far; `None` outside a
/// metered poll.
pub(crate) fn used() -> Option<Duration> {
    SLICE.get().map(|slice| slice.before + thread_cpu().saturating_sub(slice.started))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    fn burn(d: Duration) {
        let start = thread_cpu();
        while thread_cpu() - start < d {
            std::hint::black_box(0);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn charges_polls_but_not_waits() {
        assert_eq!(used(), None);
        let (seen, total) = metered(pin!(async {
            burn(Duration::from_millis(5));
            let first = used().unwrap();
            // Waiting is not charged: sleep, then check that the total barely moved.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let after_wait = used().unwrap();
            burn(Duration::from_millis(5));
            (first, after_wait, used().unwrap())
        }))
        .await;
        let (first, after_wait, last) = seen;
        assert!(first >= Duration::from_millis(5));
        assert!(after_wait - first < Duration::from_millis(25), "{first:?} → {after_wait:?}");
        assert!(last >= Duration::from_millis(10));
        assert!(total >= last && total - last < Duration::from_millis(25), "{last:?} {total:?}");
        assert_eq!(used(), None, "the slice is cleared after the poll");
    }
}
