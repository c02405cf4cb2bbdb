//! A timer with microsecond precision for the load generator's schedule: a `timerfd` the
//! tokio event loop waits on like a socket (tokio's own timer ticks in milliseconds). The only
//! `unsafe` of this crate: registering the descriptor with the event loop.

use std::os::fd::OwnedFd;
use std::time::Instant;

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

    /// Returns at `deadline` (at once if it has passed).
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
