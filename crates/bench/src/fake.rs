//! A fake server for the lab's own tests (`edgegate bench-fake`): it answers every request
//! `200 ok` after burning a known CPU time, and can stall on a schedule. What the lab measures
//! of it can then be checked against what is known.
//!
//! A thread per connection, blocking reads and writes: simple enough that its own cost per
//! request (a read, a write, a few µs) is small next to the CPU it burns.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How the fake behaves.
#[derive(Debug, Clone, Copy)]
pub struct Fake {
    /// CPU time burned for each request, on the thread's own CPU clock.
    pub burn: Duration,
    /// Every `.0`, the server answers nothing for `.1` (requests wait until it is over).
    pub stall: Option<(Duration, Duration)>,
}

const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";

impl Fake {
    /// Serves `listener` until the process is killed.
    pub fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        let started = Instant::now();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || self.connection(stream, started));
        }
        Ok(())
    }

    fn connection(self, mut stream: TcpStream, started: Instant) {
        let _ = stream.set_nodelay(true);
        let mut buf = Vec::with_capacity(8 << 10);
        let mut chunk = [0u8; 8 << 10];
        loop {
            // One request: its head, then as many body bytes as it says.
            let (head, body) = loop {
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break (end + 4, content_length(&buf[..end]));
                }
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            while buf.len() < head + body {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            buf.drain(..head + body);
            burn(self.burn);
            if let Some((every, length)) = self.stall {
                let into = started.elapsed().as_nanos() % every.as_nanos().max(1);
                let into = Duration::from_nanos(into as u64);
                if into < length {
                    std::thread::sleep(length - into);
                }
            }
            if stream.write_all(RESPONSE).is_err() {
                return;
            }
        }
    }
}

/// The `content-length` of a request head, 0 without one.
fn content_length(head: &[u8]) -> usize {
    let text = String::from_utf8_lossy(head);
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

/// Spins until this thread has used `cpu` more CPU time.
fn burn(cpu: Duration) {
    let now = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let until = now() + cpu;
    while now() < until {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_burns_what_it_is_told_and_answers() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = Fake { burn: Duration::from_millis(20), stall: None };
        std::thread::spawn(move || fake.serve(listener));
        let mut stream = TcpStream::connect(addr).unwrap();
        let cpu = crate::procfs::sample(std::process::id()).unwrap().cpu;
        let started = Instant::now();
        for _ in 0..5 {
            stream
                .write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc")
                .unwrap();
            let mut got = vec![0u8; RESPONSE.len()];
            stream.read_exact(&mut got).unwrap();
            assert_eq!(got, RESPONSE);
        }
        // 100 ms of CPU burned by its thread, and at least that much time passed.
        let used = crate::procfs::sample(std::process::id()).unwrap().cpu - cpu;
        assert!(used >= Duration::from_millis(90), "{used:?}");
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert_eq!(content_length(b"GET / HTTP/1.1\r\nContent-Length:  12 "), 12);
        assert_eq!(content_length(b"GET / HTTP/1.1\r\nhost: x"), 0);
    }
}
