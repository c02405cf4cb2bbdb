//! The writer every log line goes through (the access log, guests' lines and the gateway's
//! own): a request hands its formatted line to a bounded queue and goes on; one thread writes
//! the queue to stderr, gathering what has queued up into one `write(2)` of up to 64 KiB. No
//! request waits on a write, however slow whatever reads stderr is.
//!
//! When the queue is full, a line is dropped, not waited for: counted in
//! `edgegate_log_lines_dropped_total`, and said in a warning at most every 5 seconds. On exit
//! the queue is written out, for at most about a second if stderr does not take it.
//!
//! ```text
//!  request thread ── line ──▶ queue (EDGEGATE_LOG_QUEUE lines) ──▶ edgegate-log thread ──▶ stderr
//!                     full: dropped, counted                        (batched writes)
//! ```

use std::io::{BufWriter, Write};
use std::sync::OnceLock;
use std::time::Duration;

use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};

/// Lines the queue holds by default: about 10 MiB of 300-byte access lines, a third of a
/// second of a busy node's lines for a stderr reader that stalls.
pub const DEFAULT_QUEUE_LINES: usize = 32 * 1024;

/// The variable that sets how many lines the queue holds.
pub const QUEUE_VAR: &str = "EDGEGATE_LOG_QUEUE";

/// The most bytes one write gathers.
const BATCH_BYTES: usize = 64 * 1024;

/// How often dropped lines are reported.
const REPORT_EVERY: Duration = Duration::from_secs(5);

static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Why the log writer could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{QUEUE_VAR}={0:?}: want a number of lines, at least 1")]
pub struct BadQueue(String);

/// A writer to `out` through a queue of `EDGEGATE_LOG_QUEUE` lines (default
/// [`DEFAULT_QUEUE_LINES`]), and the guard that writes out what is queued when dropped:
/// keep it until the process ends.
pub fn non_blocking<W: Write + Send + 'static>(
    out: W,
) -> Result<(NonBlocking, WorkerGuard), BadQueue> {
    let lines = match std::env::var(QUEUE_VAR) {
        Ok(text) => text.parse().ok().filter(|&n: &usize| n > 0).ok_or(BadQueue(text))?,
        Err(_) => DEFAULT_QUEUE_LINES,
    };
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(lines)
        .thread_name("edgegate-log")
        .finish(BufWriter::with_capacity(BATCH_BYTES, out));
    let _ = DROPPED.set(writer.error_counter());
    Ok((writer, guard))
}

/// Lines dropped so far because the queue was full.
pub fn dropped_lines() -> u64 {
    DROPPED.get().map_or(0, |counter| counter.dropped_lines() as u64)
}

/// Warns, at most every 5 seconds, how many lines were dropped since the last warning (a line
/// that itself waits in the queue). Needs a tokio runtime.
pub fn report_drops() {
    tokio::spawn(async {
        let mut reported = 0;
        loop {
            tokio::time::sleep(REPORT_EVERY).await;
            let dropped = dropped_lines();
            if dropped > reported {
                tracing::warn!(
                    dropped = dropped - reported,
                    total = dropped,
                    "log lines dropped: the log queue was full (stderr is not read fast enough; {QUEUE_VAR} sets its size)"
                );
                reported = dropped;
            }
        }
    });
}
