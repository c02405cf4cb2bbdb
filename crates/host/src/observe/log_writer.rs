//! The writer every log line goes through (the access log, guests' lines and the gateway's
//! own): a request appends its formatted line to a bounded queue and goes on; one thread
//! writes what has queued up to stderr, in one `write(2)` per batch. No request waits on a
//! write, however slow whatever reads stderr is, and no request wakes the thread: it wakes
//! every [`GATHER`] while lines come, and sleeps until the next line once they stop. (A queue
//! that woke its thread for each line cost a context switch per request whenever that thread
//! had a CPU of its own: docs/benchmarks.md, "The default log level".)
//!
//! When the queue is full, a line is dropped, not waited for: counted in
//! `edgegate_log_lines_dropped_total`, and said in a warning at most every 5 seconds. On exit
//! the queue is written out, for at most about a second if stderr does not take it.
//!
//! ```text
//!  request thread ── line ──▶ queue (EDGEGATE_LOG_QUEUE lines) ──▶ edgegate-log thread ──▶ stderr
//!                     full: dropped, counted                  every 1 ms while lines come
//! ```

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread::Thread;
use std::time::Duration;

use parking_lot::Mutex;
use tracing_subscriber::fmt::MakeWriter;

/// Lines the queue holds by default: about 10 MiB of 300-byte access lines, a third of a
/// second of a busy node's lines for a stderr reader that stalls.
pub const DEFAULT_QUEUE_LINES: usize = 32 * 1024;

/// The variable that sets how many lines the queue holds.
pub const QUEUE_VAR: &str = "EDGEGATE_LOG_QUEUE";

/// How long the thread gathers lines before it writes them, while they come.
pub const GATHER: Duration = Duration::from_millis(1);

/// How long exit waits for the queue to be written out.
const LAST_WRITE: Duration = Duration::from_secs(1);

/// How often dropped lines are reported.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// The process's queue, for the dropped-line count.
static QUEUE: OnceLock<Arc<Queue>> = OnceLock::new();

/// Why the log writer could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BadQueue {
    /// `EDGEGATE_LOG_QUEUE` is not a number of lines.
    #[error("{QUEUE_VAR}={0:?}: want a number of lines, at least 1")]
    Size(String),
    /// The writing thread could not start.
    #[error("starting the log thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The lines waiting to be written.
#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    lines: usize,
}

#[derive(Debug)]
struct Queue {
    pending: Mutex<Pending>,
    /// Lines it holds at most.
    limit: usize,
    dropped: AtomicU64,
    /// The thread sleeps until a line comes (set by it, cleared by whoever wakes it).
    idle: AtomicBool,
    stopping: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Queue {
    fn push(&self, line: &[u8]) {
        let was_empty = {
            let mut pending = self.pending.lock();
            if pending.lines >= self.limit {
                drop(pending);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            pending.bytes.extend_from_slice(line);
            pending.lines += 1;
            pending.lines == 1
        };
        if was_empty
            && self.idle.swap(false, Ordering::SeqCst)
            && let Some(thread) = self.thread.get()
        {
            thread.unpark();
        }
    }

    /// What is queued, swapped for `spare` (emptied).
    fn take(&self, spare: &mut Vec<u8>) {
        spare.clear();
        let mut pending = self.pending.lock();
        std::mem::swap(&mut pending.bytes, spare);
        pending.lines = 0;
    }

    /// The thread's loop: write what has queued, gather for [`GATHER`], again; sleep while
    /// nothing comes; write the rest and end once stopping.
    fn run(&self, mut out: impl Write) {
        let mut batch = Vec::new();
        loop {
            self.take(&mut batch);
            if !batch.is_empty() {
                let _ = out.write_all(&batch).and_then(|()| out.flush());
                std::thread::park_timeout(GATHER);
                continue;
            }
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            self.idle.store(true, Ordering::SeqCst);
            // A line queued before `idle` was set did not wake us: look again.
            let empty = self.pending.lock().lines == 0;
            if empty && !self.stopping.load(Ordering::SeqCst) {
                std::thread::park();
            }
            self.idle.store(false, Ordering::SeqCst);
        }
    }
}

/// Where the log layer writes: each write is one line, queued.
#[derive(Debug, Clone)]
pub struct LogWriter(Arc<Queue>);

impl LogWriter {
    /// Queues one whole line (its newline included), or drops and counts it when full.
    pub fn line(&self, line: &[u8]) {
        self.0.push(line);
    }
}

impl Write for LogWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        self.line(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Writes out what is queued when dropped, waiting at most about a second: keep it until the
/// process ends.
#[derive(Debug)]
pub struct Flushed {
    queue: Arc<Queue>,
    done: mpsc::Receiver<()>,
}

impl Drop for Flushed {
    fn drop(&mut self) {
        self.queue.stopping.store(true, Ordering::SeqCst);
        if let Some(thread) = self.queue.thread.get() {
            thread.unpark();
        }
        let _ = self.done.recv_timeout(LAST_WRITE);
    }
}

/// A writer to `out` through a queue of `EDGEGATE_LOG_QUEUE` lines (default
/// [`DEFAULT_QUEUE_LINES`]), and the guard that writes out what is queued when dropped.
pub fn non_blocking<W: Write + Send + 'static>(out: W) -> Result<(LogWriter, Flushed), BadQueue> {
    let limit = match std::env::var(QUEUE_VAR) {
        Ok(text) => text.parse().ok().filter(|&n: &usize| n > 0).ok_or(BadQueue::Size(text))?,
        Err(_) => DEFAULT_QUEUE_LINES,
    };
    let queue = Arc::new(Queue {
        pending: Mutex::new(Pending::default()),
        limit,
        dropped: AtomicU64::new(0),
        idle: AtomicBool::new(false),
        stopping: AtomicBool::new(false),
        thread: OnceLock::new(),
    });
    let (finished, done) = mpsc::channel();
    let writing = queue.clone();
    std::thread::Builder::new().name("edgegate-log".into()).spawn(move || {
        // Before it can first sleep: whoever queues a line then can wake it.
        let _ = writing.thread.set(std::thread::current());
        writing.run(out);
        let _ = finished.send(());
    })?;
    let _ = QUEUE.set(queue.clone());
    Ok((LogWriter(queue.clone()), Flushed { queue, done }))
}

/// Lines dropped so far because the queue was full.
pub fn dropped_lines() -> u64 {
    QUEUE.get().map_or(0, |queue| queue.dropped.load(Ordering::Relaxed))
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
