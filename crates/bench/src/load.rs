//! The open-loop, constant-rate load generator (the wrk2 method).
//!
//! Request *i* is due at `start + i / rate`, whether or not earlier ones have been answered.
//! A due request goes to an idle keep-alive connection, or waits in a queue until one is
//! free; its latency is measured from the time it was **due**, not from when it was sent, so
//! a server that stalls is charged for every request the stall delayed (coordinated omission
//! corrected). The latency from the actual send is kept too, to show the difference.
//!
//! ```text
//!  dispatcher: due(0) due(1) due(2) …   (a timerfd in the same event loop: µs precision)
//!       │ push (i, due)
//!       ▼
//!   queue ──▶ connection 1 ─ send ─ response ─▶ corrected = done − due
//!         ──▶ connection 2 ─ …                  uncorrected = done − sent
//! ```
//!
//! Between events the load thread sleeps in `epoll_wait`, as wrk and any real client do, so
//! an answer costs it the wake-up it costs any client. (tokio's own timer has millisecond
//! granularity, too coarse for a schedule with requests 100 µs apart; a client that
//! busy-polled all the time would never pay that wake-up and would report less latency than
//! wrk on the same endpoint.) Only the send is made punctual: the timer wakes the dispatcher
//! `WAKE_EARLY` (150 µs) before the due time and it yields to the event loop until then, so the
//! timer's own wake-up is not counted as the server's latency.
//!
//! Each load thread (one per load CPU) runs its own single-threaded runtime, its own
//! connections and every T-th slot of the schedule; their histograms are merged. Requests due
//! during the warm-up are sent but not recorded. The dispatcher's own lateness is measured:
//! when it cannot keep the schedule, the result says so instead of blaming the server.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::latency::Latencies;
use crate::procfs::CpuTimes;
use wire::Wire;

/// How long before a request is due the dispatcher wakes, to spend the rest yielding to the
/// event loop (at most half the time between its requests). A thread woken by its timer is
/// late by tens of µs on a VM, p99 over 100 µs; counted from the due time, that lateness would
/// be charged to the server.
const WAKE_EARLY: Duration = Duration::from_micros(150);

/// One request the generator sends, again and again.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// The method.
    pub method: Method,
    /// The path and query.
    pub uri: Uri,
    /// Headers besides `host`.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The body (cloning it is a reference count).
    pub body: Bytes,
    /// The status a good answer has; any other counts as an error.
    pub expect: u16,
}

/// What to send, how fast and for how long.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// The server.
    pub addr: SocketAddr,
    /// Requests per second, over all threads.
    pub rate: f64,
    /// Sent but not recorded.
    pub warmup: Duration,
    /// Recorded, after the warm-up.
    pub duration: Duration,
    /// Keep-alive connections, over all threads.
    pub connections: usize,
    /// A request not answered within this is an error (and its connection is replaced).
    pub timeout: Duration,
}

/// CPU times read at the start and at the end of a generator's recorded window, so that they
/// cover exactly that window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowMark {
    /// The server's, so far.
    pub server_cpu: Duration,
    /// The lab's own process's (the generator's), so far.
    pub lab_cpu: Duration,
}

impl WindowMark {
    /// The CPU times of process `server` and of this one, with `helper`'s (a process the lab
    /// runs on the generator's CPUs for the server, such as its Redis) counted as the lab's;
    /// `None` when unreadable.
    pub fn read(server: u32, helper: Option<u32>) -> Option<Self> {
        let server_cpu = crate::procfs::sample(server).ok()?.cpu;
        let helper_cpu = match helper {
            Some(pid) => crate::procfs::sample(pid).ok()?.cpu,
            None => Duration::ZERO,
        };
        let lab_cpu = crate::procfs::sample(std::process::id()).ok()?.cpu + helper_cpu;
        Some(Self { server_cpu, lab_cpu })
    }
}

/// How requests failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errors {
    /// Answered with another status than expected, other than 503 and 504.
    pub status: u64,
    /// Answered 503 or 504 instead: a server out of places, CPU budget or time, which a busy
    /// machine can cause (see [`CapacityRound::excused`](crate::results::CapacityRound::excused)).
    #[serde(default)]
    pub shed: u64,
    /// The connection failed (refused, reset, closed mid-answer).
    pub io: u64,
    /// Not answered within the timeout, or still unanswered when the run ended.
    pub timeout: u64,
    /// The last unexpected status answered, so a report can say what the server refused
    /// with (a 504 is a deadline the server ran out of, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
}

impl Errors {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.status + self.shed + self.io + self.timeout
    }

    /// Counts `n` answers of `status`, which was not the one expected.
    pub(crate) fn unexpected(&mut self, status: u16, n: u64) {
        if matches!(status, 503 | 504) {
            self.shed += n;
        } else {
            self.status += n;
        }
        if n > 0 {
            self.last_status = Some(status);
        }
    }

    pub(crate) fn add(&mut self, other: &Self) {
        self.status += other.status;
        self.shed += other.shed;
        self.io += other.io;
        self.timeout += other.timeout;
        self.last_status = other.last_status.or(self.last_status);
    }

    /// What failed, for a person: `none`, or counts by kind and the last status.
    pub fn describe(&self) -> String {
        if self.total() == 0 {
            return "none".to_owned();
        }
        let status = self.last_status.map_or(String::new(), |s| format!(", the last answered {s}"));
        format!(
            "{} answered with another status, {} with 503 or 504{status}, {} broken connections, {} timed out",
            self.status, self.shed, self.io, self.timeout
        )
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    /// From the time each request was due to its last response byte.
    pub corrected: Latencies,
    /// From the time each request was sent to its last response byte.
    pub uncorrected: Latencies,
    /// How late the dispatcher queued each request: the generator's own error.
    pub dispatch_lateness: Latencies,
    /// Recorded requests answered as expected.
    pub ok: u64,
    /// Recorded requests that failed.
    pub errors: Errors,
    /// The most requests outstanding at the server at once (summed over load threads: an
    /// upper bound when there are several).
    pub max_in_flight: usize,
    /// Every CPU's time at the start and at the end of the recorded part (`None`: `/proc/stat`
    /// was unreadable), to tell how much of it the hypervisor took.
    pub cpu_times: Option<(CpuTimes, CpuTimes)>,
    /// What `at_window` read at the same two moments.
    pub marks: Option<(WindowMark, WindowMark)>,
}

impl LoadResult {
    /// Adds `other`'s requests to these (its in-flight maximum too: the two ran side by side,
    /// so they share one recorded window: its CPU times are kept only when these have none).
    pub fn merge(&mut self, other: &Self) {
        if self.cpu_times.is_none() {
            self.cpu_times.clone_from(&other.cpu_times);
            self.marks = other.marks;
        }
        self.corrected.merge(&other.corrected);
        self.uncorrected.merge(&other.uncorrected);
        self.dispatch_lateness.merge(&other.dispatch_lateness);
        self.ok += other.ok;
        self.errors.add(&other.errors);
        self.max_in_flight += other.max_in_flight;
    }

    /// Whether the generator kept its schedule: 99 % of requests queued within `slack` of
    /// their time. When it did not, the rate was the generator's limit, not the server's.
    pub fn kept_schedule(&self, slack: Duration) -> bool {
        self.dispatch_lateness.quantile(0.99) <= slack
    }
}

/// The schedule of one load thread: every `stride`-th slot from `offset`, one slot per
/// `1 / rate` seconds. Computed from the slot number, so rounding never accumulates.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    interval_ns: f64,
    offset: u64,
    stride: u64,
}

impl Schedule {
    /// Thread `offset` of `stride` threads sharing `rate` requests per second from `start`.
    pub fn new(start: Instant, rate: f64, offset: u64, stride: u64) -> Self {
        Self { start, interval_ns: 1e9 / rate, offset, stride: stride.max(1) }
    }

    /// The time between this thread's requests.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos((self.interval_ns * self.stride as f64) as u64)
    }

    /// When this thread's `i`-th request is due.
    pub fn due(&self, i: u64) -> Instant {
        let slot = (i * self.stride + self.offset) as f64;
        self.start + Duration::from_nanos((slot * self.interval_ns).round() as u64)
    }
}

/// Runs `spec` with one load thread per entry of `cpus` (each pinned to that CPU set; one
/// unpinned thread when `cpus` is empty). Requests cycle through `requests` in order.
/// `at_window` is read as the recording starts and ends.
pub fn run(
    spec: &LoadSpec,
    requests: &Arc<[RequestTemplate]>,
    cpus: &[Vec<usize>],
    at_window: &(dyn Fn() -> Option<WindowMark> + Sync),
) -> anyhow::Result<LoadResult> {
    anyhow::ensure!(!requests.is_empty(), "no requests to send");
    anyhow::ensure!(spec.rate > 0.0, "the rate must be positive");
    let threads: Vec<Option<&[usize]>> = if cpus.is_empty() {
        vec![None]
    } else {
        cpus.iter().map(|c| Some(c.as_slice())).collect()
    };
    let stride = threads.len() as u64;
    // A common start a little ahead, so every thread has connected before its first slot.
    let start = Instant::now() + Duration::from_millis(200);
    let (results, cpu_times) = std::thread::scope(|scope| {
        // Reads the CPU times as the recording starts and ends (a sleeping thread, woken
        // twice), unless a load thread fails first and its channel is dropped.
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let window = scope.spawn(move || {
            let at = |when: Instant| match stopped
                .recv_timeout(when.saturating_duration_since(Instant::now()))
            {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    Some((CpuTimes::read().ok()?, at_window()))
                }
                _ => None,
            };
            let from = start + spec.warmup;
            let (first, first_mark) = at(from)?;
            let (last, last_mark) = at(from + spec.duration)?;
            Some(((first, last), first_mark.zip(last_mark)))
        });
        let handles: Vec<_> = threads
            .iter()
            .enumerate()
            .map(|(t, pin)| {
                let connections = (spec.connections / threads.len()).max(1);
                let schedule = Schedule::new(start, spec.rate, t as u64, stride);
                let requests = requests.clone();
                scope.spawn(move || {
                    if let Some(cpus) = pin {
                        crate::affinity::pin_current_thread(cpus)?;
                    }
                    thread_run(spec, schedule, connections, &requests, t)
                })
            })
            .collect();
        let results: Vec<anyhow::Result<LoadResult>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a load thread panicked"))))
            .collect();
        if results.iter().any(Result::is_err) {
            drop(stop);
        }
        (results, window.join().ok().flatten())
    });
    let (cpu_times, marks) = cpu_times.unzip();
    let mut total = LoadResult { cpu_times, marks: marks.flatten(), ..LoadResult::default() };
    for result in results {
        total.merge(&result?);
    }
    Ok(total)
}

/// One queued request: which template, when it was due, whether it is recorded.
#[derive(Debug, Clone, Copy)]
struct Job {
    template: usize,
    due: Instant,
    recorded: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: VecDeque<Job>,
    dispatching: bool,
    in_flight: usize,
    result: LoadResult,
}

fn thread_run(
    spec: &LoadSpec,
    schedule: Schedule,
    connections: usize,
    requests: &Arc<[RequestTemplate]>,
    thread: usize,
) -> anyhow::Result<LoadResult> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let host = spec.addr.to_string();
        let encoded: Rc<[Bytes]> = requests.iter().map(|t| wire::encode(t, &host)).collect();
        let shared = Rc::new(RefCell::new(Shared { dispatching: true, ..Shared::default() }));
        let wake = Rc::new(Notify::new());
        let mut tasks = Vec::with_capacity(connections);
        for _ in 0..connections {
            let wire = Wire::connect(spec.addr).await?;
            let connection = Connection {
                spec: spec.clone(),
                requests: requests.clone(),
                encoded: encoded.clone(),
                shared: shared.clone(),
                wake: wake.clone(),
            };
            tasks.push(tokio::task::spawn_local(connection.serve(wire)));
        }
        let recorded_from = schedule.due(0) + spec.warmup;
        let end = recorded_from + spec.duration;
        let timer = crate::timer::Timer::new()?;
        let early = WAKE_EARLY.min(schedule.interval() / 2);
        let mut i = 0u64;
        loop {
            let due = schedule.due(i);
            if due >= end {
                break;
            }
            timer.wait_until(due, early).await?;
            let now = Instant::now();
            let recorded = due >= recorded_from;
            let template = (i as usize * schedule.stride as usize + thread) % requests.len();
            {
                let mut s = shared.borrow_mut();
                if recorded {
                    s.result.dispatch_lateness.record(now - due);
                }
                s.queue.push_back(Job { template, due, recorded });
            }
            wake.notify_one();
            i += 1;
        }
        shared.borrow_mut().dispatching = false;
        wake.notify_waiters();
        // Whatever is not answered by the drain deadline is a timeout.
        let drain = spec.timeout.min(Duration::from_secs(2));
        let _ = tokio::time::timeout(drain, futures_join(tasks)).await;
        let mut s = shared.borrow_mut();
        let unanswered = s.queue.iter().filter(|j| j.recorded).count() as u64 + s.in_flight as u64;
        s.result.errors.timeout += unanswered;
        Ok(std::mem::take(&mut s.result))
    })
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        let _ = task.await;
    }
}

struct Connection {
    spec: LoadSpec,
    requests: Arc<[RequestTemplate]>,
    /// The same requests, encoded.
    encoded: Rc<[Bytes]>,
    shared: Rc<RefCell<Shared>>,
    wake: Rc<Notify>,
}

impl Connection {
    async fn next_job(&self) -> Option<Job> {
        loop {
            {
                let mut s = self.shared.borrow_mut();
                if let Some(job) = s.queue.pop_front() {
                    s.in_flight += 1;
                    s.result.max_in_flight = s.result.max_in_flight.max(s.in_flight);
                    return Some(job);
                }
                if !s.dispatching {
                    return None;
                }
            }
            self.wake.notified().await;
        }
    }

    async fn serve(self, wire: Wire) {
        let mut wire = Some(wire);
        while let Some(job) = self.next_job().await {
            let template = &self.requests[job.template];
            let sent = Instant::now();
            let outcome = match wire.as_mut() {
                Some(w) => {
                    tokio::time::timeout(self.spec.timeout, w.exchange(&self.encoded[job.template]))
                        .await
                        .map_err(|_| Failure::Timeout)
                        .and_then(|r| r.map_err(|_| Failure::Io))
                }
                None => Err(Failure::Io),
            };
            let done = Instant::now();
            let closes = outcome.as_ref().is_ok_and(|a| a.closes);
            if self.record(job, template, sent, done, outcome.map(|a| a.status)) || closes {
                // A broken, stuck or closing connection is replaced before the next request.
                wire = Wire::connect(self.spec.addr).await.ok();
                if wire.is_none() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    /// Records one outcome; returns whether the connection must be replaced.
    fn record(
        &self,
        job: Job,
        template: &RequestTemplate,
        sent: Instant,
        done: Instant,
        outcome: Result<u16, Failure>,
    ) -> bool {
        let mut s = self.shared.borrow_mut();
        s.in_flight -= 1;
        let r = &mut s.result;
        let recorded = u64::from(job.recorded);
        match outcome {
            Ok(status) if status == template.expect => {
                if job.recorded {
                    r.ok += 1;
                    r.corrected.record(done - job.due);
                    r.uncorrected.record(done - sent);
                }
                false
            }
            Ok(status) => {
                r.errors.unexpected(status, recorded);
                false
            }
            Err(Failure::Io) => {
                r.errors.io += recorded;
                true
            }
            Err(Failure::Timeout) => {
                r.errors.timeout += recorded;
                true
            }
        }
    }
}

enum Failure {
    Io,
    Timeout,
}

/// Sends `template` once on a new connection and returns the status and the body: how the
/// lab checks that a runtime answers correctly before it loads it. It uses hyper's client,
/// which decodes every body the way a general client does; the load itself goes through
/// the generator's own client (`wire`), which only frames them.
pub async fn request_once(
    addr: SocketAddr,
    template: &RequestTemplate,
) -> anyhow::Result<(u16, Bytes)> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = http::Request::new(Full::new(template.body.clone()));
    *request.method_mut() = template.method.clone();
    *request.uri_mut() = template.uri.clone();
    let headers = request.headers_mut();
    headers.insert(http::header::HOST, HeaderValue::from_str(&addr.to_string())?);
    for (name, value) in &template.headers {
        headers.insert(name.clone(), value.clone());
    }
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

pub mod closed;
mod stream;
mod wire;

pub use stream::{TlsTransport, Transport};

#[cfg(test)]
mod tests;
