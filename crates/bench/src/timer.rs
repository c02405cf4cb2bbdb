//! A timer with microsecond precision for the load generator's schedule: a `timerfd` the
//! tokio event loop waits on like a socket (tokio's own timer ticks in milliseconds). The only
//! `unsafe` of this crate: registering the descriptor with the event loop.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A timer with microsecond precision that the event loop waits on like a socket.
#[derive(Debug)]
pub struct Timer(AsyncFd<OwnedFd>);

impl Timer {
    /// A timer on the monotonic clock. Needs a tokio runtime.
    pub fn new() -> std::io::Result<Self> {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        // timerfd expiries are high-resolution timers; no timer slack delays them.
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // SAFETY: the `OwnedFd` is moved into the `AsyncFd` and owned by it until it is
        // dropped, so the descriptor stays open and is always the same one.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(std::io::Error::from)?;
        Ok(Self(fd))
    }

    /// Returns at `deadline`, to within a microsecond or two: sleeps on the timer until
    /// `early` before it (a sleeping thread's wake-up is late by tens of µs on a VM), then
    /// yields to the event loop until it is due. Yielding, not blocking, so answers that
    /// arrive in that window are still read at once.
    pub async fn wait_until(&self, deadline: Instant, early: Duration) -> std::io::Result<()> {
        if let Some(wake) = deadline.checked_sub(early) {
            self.sleep_until(wake).await?;
        }
        while Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// Returns at `deadline` (at once if it has passed), as late as the kernel wakes it.
    pub async fn sleep_until(&self, deadline: Instant) -> std::io::Result<()> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        let Some(wait) = deadline.checked_duration_since(Instant::now()).filter(|w| !w.is_zero())
        else {
            return Ok(());
        };
        let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
        let value =
            Timespec { tv_sec: wait.as_secs() as i64, tv_nsec: i64::from(wait.subsec_nanos()) };
        let spec = Itimerspec { it_interval: zero, it_value: value };
        timerfd_settime(self.0.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
        loop {
            let mut ready = self.0.readable().await?;
            let mut expirations = [0u8; 8];
            match rustix::io::read(self.0.get_ref(), &mut expirations) {
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_never_returns_before_the_deadline() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let timer = Timer::new().unwrap();
            for early_us in [0, 100, 2_000] {
                let deadline = Instant::now() + Duration::from_millis(1);
                timer.wait_until(deadline, Duration::from_micros(early_us)).await.unwrap();
                assert!(
                    Instant::now() >= deadline,
                    "returned before the deadline ({early_us} µs early)"
                );
            }
            // A deadline already past returns at once.
            timer.wait_until(Instant::now(), Duration::from_micros(100)).await.unwrap();
        });
    }
}
