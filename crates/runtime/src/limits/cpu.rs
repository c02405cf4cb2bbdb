//! Measuring the CPU time a request's guest code consumes.
//!
//! A request's guest runs only while the future that drives it is being polled: on a Wasmtime
//! fiber, on whichever tokio worker thread polls it. [`metered`] wraps the future of the
//! guest's entry-point call (not the instantiation before it, which is the gateway's work) and
//! charges each poll to it. Between polls (waiting for an async host call, after a yield, while
//! other tasks run on the thread) nothing is charged. The epoch callback, which runs on the same
//! thread inside a poll, asks [`used`] for the total so far.
//!
//! Reading the thread CPU clock is a system call (~0.37 µs here), so the first poll, nearly
//! always the whole of a short request, reads it only once it has run into an epoch tick.
//! Until then it is charged its wall time: at most [`UNCLOCKED`] if it ends before a tick
//! (two reads of the monotonic clock, which the vDSO answers without a system call), at most
//! one tick if it runs into one. Every later poll (the guest resumed after the epoch yielded
//! it, or after an asynchronous host call) reads the CPU clock as it starts, so all of it is
//! measured: a guest that runs long is charged what it used, to the microsecond.
//!
//! ```text
//!   poll 1 (first)                 yield or wait (not charged)     poll 2 (later)
//! ├──────────┬── tick ──────┤ · · · · · · · · · · · · · · · · ├────────────────────┤
//! wall₀      cpu₁ (first used()) cpu₂                          cpu₃                 cpu₄
//! charged = min(wall₁ − wall₀, tick) + (cpu₂ − cpu₁)   then   + (cpu₄ − cpu₃)
//! ```
//!
//! Wall time and CPU time differ only while the thread is preempted. The caps bound what a
//! preemption can add to the first poll: at most [`UNCLOCKED`] to a short one, so a request
//! of a few polls on a busy machine is not reported with CPU it never used, and at most one
//! tick before the first clock read of a long one. (Until 2026-12 every poll was charged at
//! most [`UNCLOCKED`] before its first clock read, which a guest running from tick to tick
//! met each time: it was charged about a fifth of the CPU it used, and a 100 ms budget
//! stopped it after 530 ms.)

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The most wall time a poll is charged before its CPU clock is read: longer than the polls
/// of nearly every request (a few to a hundred microseconds), far shorter than a budget.
const UNCLOCKED: Duration = Duration::from_micros(200);

#[derive(Clone, Copy)]
struct Slice {
    /// When the current poll started.
    started: Instant,
    /// CPU time charged by earlier polls of the same request.
    before: Duration,
    /// The most wall time the poll is charged before its CPU clock is read (the tick).
    cap: Duration,
    /// Once the poll has been asked for its total: what it had used then (wall time, capped)
    /// and the thread's CPU clock at that moment.
    clocked: Option<(Duration, Duration)>,
}

impl Slice {
    /// What this poll has used so far; reads the CPU clock, and starts from it next time.
    fn used(&mut self) -> Duration {
        let (wall, at) = *self
            .clocked
            .get_or_insert_with(|| (self.started.elapsed().min(self.cap), thread_cpu()));
        wall + thread_cpu().saturating_sub(at)
    }

    /// What this poll used in all, when it ends: its wall time if nobody asked.
    fn finish(mut self) -> Duration {
        match self.clocked {
            None => self.started.elapsed().min(self.cap.min(UNCLOCKED)),
            Some(_) => self.used(),
        }
    }
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

/// Drives `future`, charging each poll to it, so that [`used`] can tell inside a poll how much
/// the future has consumed; returns its output and the CPU time it used in all. `tick` is the
/// epoch tick: the most the first poll is charged by the wall clock before its CPU clock is
/// read (see the module documentation). Each poll's charge is also added to `sink` (in
/// nanoseconds) as it ends, so that what was used is known even if the future is dropped
/// before it completes (a deadline's timer, a client that went away).
pub(crate) async fn metered<F: Future>(
    mut future: Pin<&mut F>,
    tick: Duration,
    sink: &AtomicU64,
) -> (F::Output, Duration) {
    let mut charged = Duration::ZERO;
    let mut first = true;
    std::future::poll_fn(move |cx| {
        let started = Instant::now();
        // A later poll may run long: measured from its start.
        let clocked = (!std::mem::take(&mut first)).then(|| (Duration::ZERO, thread_cpu()));
        let slice = Slice { started, before: charged, cap: tick, clocked };
        let previous = SLICE.replace(Some(slice));
        let poll = future.as_mut().poll(cx);
        let slice = SLICE.replace(previous).unwrap_or(slice);
        let used = slice.finish();
        charged += used;
        sink.fetch_add(u64::try_from(used.as_nanos()).unwrap_or(u64::MAX), Relaxed);
        poll.map(|output| (output, charged))
    })
    .await
}

/// Whether the guest being polled on this thread has used more than `budget` by `now`; false
/// outside a metered poll. Cheap while it cannot have (what it was charged before this poll,
/// plus this poll's wall time, is within the budget: CPU time never runs ahead of wall time on
/// one thread); only then is the CPU clock read.
pub(crate) fn over(now: Instant, budget: Duration) -> bool {
    let Some(slice) = SLICE.get() else { return false };
    if slice.before + now.saturating_duration_since(slice.started) <= budget {
        return false;
    }
    used().is_some_and(|used| used > budget)
}

/// The CPU time the guest being polled on this thread has used so far; `None` outside a
/// metered poll.
pub(crate) fn used() -> Option<Duration> {
    let mut slice = SLICE.get()?;
    let used = slice.before + slice.used();
    SLICE.set(Some(slice));
    Some(used)
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
        let sink = AtomicU64::new(0);
        let long_tick = Duration::from_secs(1);
        let (seen, total) = metered(
            pin!(async {
                // As an epoch tick would, read the clock early in each poll: from then on the
                // poll is charged its CPU time.
                used();
                burn(Duration::from_millis(5));
                let first = used().unwrap();
                // Waiting is not charged: sleep, then check that the total barely moved.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let after_wait = used().unwrap();
                burn(Duration::from_millis(5));
                (first, after_wait, used().unwrap())
            }),
            long_tick,
            &sink,
        )
        .await;
        assert_eq!(Duration::from_nanos(sink.load(Relaxed)), total, "the sink has it all");
        let (first, after_wait, last) = seen;
        assert!(first >= Duration::from_millis(5));
        assert!(after_wait - first < Duration::from_millis(25), "{first:?} → {after_wait:?}");
        assert!(last >= Duration::from_millis(10));
        assert!(total >= last && total - last < Duration::from_millis(25), "{last:?} {total:?}");
        assert_eq!(used(), None, "the slice is cleared after the poll");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_poll_is_charged_little_wall_time_before_its_clock_is_read() {
        let tick = Duration::from_millis(1);
        let (seen, total) = metered(
            pin!(async {
                // Blocked, not running: the wall clock would charge 20 ms.
                std::thread::sleep(Duration::from_millis(20));
                let blocked = used().unwrap();
                burn(Duration::from_millis(5));
                (blocked, used().unwrap())
            }),
            tick,
            &AtomicU64::new(0),
        )
        .await;
        let (blocked, after_burn) = seen;
        assert!(blocked <= UNCLOCKED + Duration::from_millis(1), "{blocked:?}");
        assert!(after_burn >= Duration::from_millis(5), "{after_burn:?}");
        assert!(after_burn < Duration::from_millis(12), "{after_burn:?}");
        assert!(total >= after_burn && total < Duration::from_millis(15), "{total:?}");
        // A short poll nobody asks about is charged its wall time, read without a system call.
        let ((), short) =
            metered(pin!(async { burn(Duration::from_micros(100)) }), tick, &AtomicU64::new(0))
                .await;
        assert!(short >= Duration::from_micros(100) && short <= UNCLOCKED, "{short:?}");
        // Preempted polls (here: blocked) are charged at most the cap each, not a tick each:
        // ten of them stay under the default 2 ms budget.
        let mut total = Duration::ZERO;
        for _ in 0..10 {
            let sleeping = pin!(async { std::thread::sleep(Duration::from_millis(2)) });
            let ((), blocked) = metered(sleeping, tick, &AtomicU64::new(0)).await;
            total += blocked;
        }
        assert!(total <= Duration::from_millis(2), "{total:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn over_says_whether_the_budget_is_spent() {
        assert!(!over(Instant::now(), Duration::ZERO), "outside a metered poll");
        let ((before, after, long), _) = metered(
            pin!(async {
                let before = over(Instant::now(), Duration::from_millis(3));
                burn(Duration::from_millis(5));
                let now = Instant::now();
                (before, over(now, Duration::from_millis(3)), over(now, Duration::from_secs(1)))
            }),
            Duration::from_secs(1),
            &AtomicU64::new(0),
        )
        .await;
        assert!(!before && after && !long, "{before} {after} {long}");
    }

    /// A guest that runs from tick to tick, as the epoch callback yields it each time, is
    /// charged the CPU it used, not a fraction of it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_guest_yielded_at_every_tick_is_charged_all_it_used() {
        let tick = Duration::from_millis(1);
        let ((), total) = metered(
            pin!(async {
                for _ in 0..20 {
                    burn(tick);
                    // The epoch callback: the total so far, then a yield.
                    used();
                    tokio::task::yield_now().await;
                }
            }),
            tick,
            &AtomicU64::new(0),
        )
        .await;
        assert!(total >= Duration::from_millis(19), "charged {total:?} of 20 ms");
    }
}
