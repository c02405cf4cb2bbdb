//! The closed-loop generator: each keep-alive connection sends its next request the moment
//! the last one is answered, as wrk does. It measures how many requests a server can answer,
//! not how it answers a given rate (that is the open-loop generator's job, [`super::run`]).
//!
//! ```text
//!  epoll (mio) ──readable──▶ read ─▶ parse ─▶ record (sent → done) ─▶ write the next request
//!      ▲                                                                       │
//!      └───────────────────────── writable (a request left half written) ◀─────┘
//! ```
//!
//! One thread per load CPU runs its own event loop and its share of the connections, with no
//! runtime and no task switch between a response and the next request: the generator must
//! not be what limits a server that answers 200 000 requests a second. The recorded window
//! starts after the warm-up; a request counts in it when its answer arrives in it.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::stream::{Stream, Transport};
use super::wire::{self, Answer};
use super::{Errors, RequestTemplate, WindowMark};
use crate::latency::Latencies;
use crate::procfs::CpuTimes;

/// Each connection's read buffer to begin with: most responses fit; it doubles for one that
/// does not.
const READ_BUF: usize = 16 << 10;

/// How often the loop looks for requests that outlived the timeout.
const TIMEOUT_SCAN: Duration = Duration::from_millis(50);

/// What to send and for how long.
#[derive(Debug, Clone)]
pub struct ClosedSpec {
    /// The server.
    pub addr: SocketAddr,
    /// Keep-alive connections, over all threads.
    pub connections: usize,
    /// Sent but not recorded.
    pub warmup: Duration,
    /// Recorded, after the warm-up.
    pub duration: Duration,
    /// A request not answered within this is an error (and its connection is replaced).
    pub timeout: Duration,
    /// Plain, or TLS (kept alive, or a connection and handshake per request).
    pub transport: Transport,
}

/// What the recorded window saw.
#[derive(Debug, Clone, Default)]
pub struct ClosedResult {
    /// Requests answered as expected in the window.
    pub ok: u64,
    /// Requests that failed in the window.
    pub errors: Errors,
    /// From each request's send to its last response byte.
    pub latency: Latencies,
    /// The window's length as measured.
    pub window: Duration,
    /// CPU time of the load threads during the window, summed.
    pub load_cpu: Duration,
    /// Every CPU's time at the start and the end of the window (`None`: `/proc/stat` was
    /// unreadable).
    pub cpu_times: Option<(CpuTimes, CpuTimes)>,
    /// What `at_window` returned at the window's start and end.
    pub marks: Option<(WindowMark, WindowMark)>,
}

impl ClosedResult {
    /// Answers per second in the window.
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.window.as_secs_f64().max(1e-9)
    }
}

/// Runs `spec` with one load thread per entry of `cpus` (one unpinned thread when empty).
/// Requests cycle through `requests`. `at_window` is read as the window starts and ends.
pub fn run(
    spec: &ClosedSpec,
    requests: &Arc<[RequestTemplate]>,
    cpus: &[Vec<usize>],
    at_window: &(dyn Fn() -> Option<WindowMark> + Sync),
) -> anyhow::Result<ClosedResult> {
    anyhow::ensure!(!requests.is_empty(), "no requests to send");
    anyhow::ensure!(spec.connections > 0, "no connections");
    let threads: Vec<Option<&[usize]>> = if cpus.is_empty() {
        vec![None]
    } else {
        cpus.iter().map(|c| Some(c.as_slice())).collect()
    };
    let n = threads.len().min(spec.connections);
    // A common start a little ahead, so every thread has connected first.
    let start = Instant::now() + Duration::from_millis(100);
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = threads[..n]
            .iter()
            .enumerate()
            .map(|(t, pin)| {
                let connections = spec.connections / n + usize::from(t < spec.connections % n);
                let requests = requests.clone();
                scope.spawn(move || -> anyhow::Result<ClosedResult> {
                    if let Some(cpus) = pin {
                        crate::affinity::pin_current_thread(cpus)?;
                    }
                    let marks = (t == 0).then_some(at_window);
                    Loop::new(spec, connections, &requests, t, n)?.run(start, marks)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a load thread panicked"))))
            .collect::<Vec<_>>()
    });
    let mut total = ClosedResult::default();
    for result in results {
        let result = result?;
        if total.cpu_times.is_none() {
            total.cpu_times = result.cpu_times;
            total.marks = result.marks;
            total.window = result.window;
        }
        total.ok += result.ok;
        total.errors.add(&result.errors);
        total.latency.merge(&result.latency);
        total.load_cpu += result.load_cpu;
    }
    Ok(total)
}

/// One keep-alive connection and the request on it.
struct Conn {
    stream: Stream,
    /// What was read and not yet parsed: `buf[head..tail]`.
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    /// The request being sent or answered, and when it was sent.
    request: usize,
    sent: Instant,
    /// Bytes of it written so far.
    written: usize,
}

impl Conn {
    /// Makes room to read into: moves what is unparsed to the front, and doubles the buffer
    /// when a response does not fit.
    fn make_room(&mut self) {
        if self.head == self.tail {
            (self.head, self.tail) = (0, 0);
        }
        if self.tail < self.buf.len() {
            return;
        }
        if self.head > 0 {
            self.buf.copy_within(self.head..self.tail, 0);
            (self.head, self.tail) = (0, self.tail - self.head);
        } else {
            self.buf.resize(self.buf.len() * 2, 0);
        }
    }

    fn consume(&mut self, len: usize) {
        self.head += len;
    }
}

/// One load thread's event loop.
struct Loop<'a> {
    spec: &'a ClosedSpec,
    requests: &'a [RequestTemplate],
    encoded: Vec<Bytes>,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    /// The next request to send (cycling through `requests`, each thread its own stride).
    next: usize,
    stride: usize,
    result: ClosedResult,
}

impl<'a> Loop<'a> {
    fn new(
        spec: &'a ClosedSpec,
        connections: usize,
        requests: &'a [RequestTemplate],
        thread: usize,
        threads: usize,
    ) -> anyhow::Result<Self> {
        let host = spec.addr.to_string();
        let mut this = Self {
            spec,
            requests,
            encoded: requests.iter().map(|t| wire::encode(t, &host)).collect(),
            poll: Poll::new()?,
            conns: Vec::with_capacity(connections),
            next: thread,
            stride: threads,
            result: ClosedResult::default(),
        };
        for i in 0..connections {
            let conn = this.connect(i)?;
            this.conns.push(Some(conn));
        }
        Ok(this)
    }

    fn connect(&mut self, token: usize) -> std::io::Result<Conn> {
        let stream = std::net::TcpStream::connect(self.spec.addr)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let mut stream = Stream::new(TcpStream::from_std(stream), &self.spec.transport)?;
        self.poll.registry().register(
            stream.socket(),
            Token(token),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        Ok(Conn {
            stream,
            buf: vec![0; READ_BUF],
            head: 0,
            tail: 0,
            request: 0,
            sent: Instant::now(),
            written: 0,
        })
    }

    fn run(
        mut self,
        start: Instant,
        at_window: Option<&(dyn Fn() -> Option<WindowMark> + Sync)>,
    ) -> anyhow::Result<ClosedResult> {
        std::thread::sleep(start.saturating_duration_since(Instant::now()));
        let from = start + self.spec.warmup;
        let end = from + self.spec.duration;
        let mut opened: Option<(Instant, Duration, Option<CpuTimes>, Option<WindowMark>)> = None;
        let mut events = Events::with_capacity(1024);
        for token in 0..self.conns.len() {
            self.send_next(token, Instant::now());
        }
        let mut scanned = Instant::now();
        loop {
            let now = Instant::now();
            if opened.is_none() && now >= from {
                opened =
                    Some((now, thread_cpu(), CpuTimes::read().ok(), at_window.and_then(|f| f())));
            }
            if now >= end {
                break;
            }
            let wait = if opened.is_none() { from - now } else { end - now };
            self.poll.poll(&mut events, Some(wait.min(TIMEOUT_SCAN)))?;
            for event in &events {
                let token = event.token().0;
                if event.is_writable() {
                    self.write(token);
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read(token, opened.is_some());
                }
            }
            if now.duration_since(scanned) >= TIMEOUT_SCAN {
                scanned = now;
                self.expire(now, opened.is_some());
            }
        }
        let closed =
            (Instant::now(), thread_cpu(), CpuTimes::read().ok(), at_window.and_then(|f| f()));
        if let Some((at, cpu, times, mark)) = opened {
            self.result.window = closed.0 - at;
            self.result.load_cpu = closed.1.saturating_sub(cpu);
            self.result.cpu_times = times.zip(closed.2);
            self.result.marks = mark.zip(closed.3);
        }
        Ok(self.result)
    }

    /// Starts the next request on connection `token`.
    fn send_next(&mut self, token: usize, now: Instant) {
        let request = self.next % self.requests.len();
        self.next += self.stride;
        if let Some(conn) = self.conns[token].as_mut() {
            conn.request = request;
            conn.sent = now;
            conn.written = 0;
        }
        self.write(token);
    }

    /// Writes what is left of the connection's request, as far as the socket takes it.
    fn write(&mut self, token: usize) {
        let Some(conn) = self.conns[token].as_mut() else { return };
        let bytes = &self.encoded[conn.request];
        while conn.written < bytes.len() {
            match conn.stream.write(&bytes[conn.written..]) {
                Ok(0) => return self.fail(token, false, true),
                Ok(n) => conn.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.fail(token, false, true),
            }
        }
        // TLS records (or handshake messages) the socket did not take at once.
        if conn.stream.flush().is_err() {
            self.fail(token, false, true);
        }
    }

    /// Reads what the socket has, and answers every whole response in it.
    fn read(&mut self, token: usize, recording: bool) {
        loop {
            let Some(conn) = self.conns[token].as_mut() else { return };
            conn.make_room();
            match conn.stream.read(&mut conn.buf[conn.tail..]) {
                Ok(0) => return self.fail(token, recording, true),
                Ok(n) => conn.tail += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return self.fail(token, recording, true),
            }
            loop {
                let Some(conn) = self.conns[token].as_mut() else { return };
                match wire::parse(&conn.buf[conn.head..conn.tail]) {
                    Ok(Some((answer, len))) => {
                        conn.consume(len);
                        self.answered(token, answer, recording);
                    }
                    Ok(None) => break,
                    Err(_) => return self.fail(token, recording, false),
                }
            }
        }
    }

    /// Records one answer and sends the next request (on a new connection if this one
    /// closes).
    fn answered(&mut self, token: usize, answer: Answer, recording: bool) {
        let now = Instant::now();
        let Some(conn) = self.conns[token].as_ref() else { return };
        if recording {
            if answer.status == self.requests[conn.request].expect {
                self.result.ok += 1;
                self.result.latency.record(now - conn.sent);
            } else {
                self.result.errors.unexpected(answer.status, 1);
            }
        }
        let per_request = matches!(&self.spec.transport, Transport::Tls(t) if t.per_request);
        if answer.closes || per_request {
            self.reconnect(token);
        }
        self.send_next(token, now);
    }

    /// A broken connection: count the failure and replace it.
    fn fail(&mut self, token: usize, recording: bool, io: bool) {
        if recording {
            if io {
                self.result.errors.io += 1;
            } else {
                self.result.errors.status += 1;
            }
        }
        self.reconnect(token);
        self.send_next(token, Instant::now());
    }

    fn reconnect(&mut self, token: usize) {
        if let Some(mut old) = self.conns[token].take() {
            let _ = self.poll.registry().deregister(old.stream.socket());
        }
        // A server that refuses connections leaves the slot empty; the scan retries it.
        self.conns[token] = self.connect(token).ok();
    }

    /// Requests that outlived the timeout are failures; empty slots are reconnected.
    fn expire(&mut self, now: Instant, recording: bool) {
        for token in 0..self.conns.len() {
            match &self.conns[token] {
                Some(conn) if now.duration_since(conn.sent) > self.spec.timeout => {
                    if recording {
                        self.result.errors.timeout += 1;
                    }
                    self.reconnect(token);
                    self.send_next(token, now);
                }
                Some(_) => {}
                None => {
                    self.conns[token] = self.connect(token).ok();
                    self.send_next(token, now);
                }
            }
        }
    }
}

/// This thread's CPU time so far.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
