//! The log writer: every line goes through a bounded queue and a thread of its own, so no
//! request waits on stderr; a full queue drops lines and counts them, and exit writes out
//! what is queued.

use crate::support::{Gateway, counter, get, metric_line};

const PING: &str = r#"
[[routes]]
path = "/ping"
respond = { body = "pong" }
"#;

fn access_lines(log: &str) -> usize {
    log.lines().filter(|l| l.contains("edgegate::access") && l.contains("path=\"/ping\"")).count()
}

/// `n` requests to `/ping` from `threads` clients at once, each answered.
fn load(gw: &Gateway, threads: usize, n: usize) {
    let addr = gw.addr;
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(move || {
                for _ in 0..n / threads {
                    assert_eq!(get(addr, "/ping").text(), "pong");
                }
            });
        }
    });
}

#[test]
fn no_line_is_lost_under_load() {
    let mut gw = Gateway::start(PING);
    load(&gw, 8, 2000);
    assert!(
        metric_line(&gw, "edgegate_log_lines_dropped_total 0").is_some(),
        "the drop counter is exported, at 0"
    );
    let (_, log) = gw.stop();
    assert_eq!(access_lines(&log), 2000, "{}", &log[log.len().saturating_sub(2000)..]);
}

/// Whatever reads stderr stops reading: requests go on, the lines that do not fit are
/// dropped and counted, and a warning says so once the reader is back.
#[test]
fn a_stalled_stderr_stalls_no_request_and_dropped_lines_are_counted() {
    let (mut gw, release) =
        Gateway::start_with_stalled_stderr(PING, &[("EDGEGATE_LOG_QUEUE", "16")]);
    // Far more lines than the pipe (64 KiB), the writer's batch and the queue hold.
    load(&gw, 4, 3000);
    let dropped = counter(&gw, "edgegate_log_lines_dropped_total");
    assert!(dropped > 0, "nothing counted as dropped");
    release.send(()).unwrap();
    // The warning comes with the reporter's next look, within 5 s.
    std::thread::sleep(std::time::Duration::from_secs(6));
    let (_, log) = gw.stop();
    let written = access_lines(&log) as u64;
    assert!(written < 3000, "{written} lines written, none dropped");
    assert!(written + dropped >= 3000, "{written} written and {dropped} dropped of 3000");
    assert!(
        log.contains("log lines dropped"),
        "no warning: {}",
        &log[log.len().saturating_sub(2000)..]
    );
}

/// Lines still queued when the process is told to stop are written before it exits.
#[test]
fn shutdown_writes_out_the_queued_lines() {
    let (mut gw, release) = Gateway::start_with_stalled_stderr(PING, &[]);
    // More than the pipe and the writer's batch hold: the rest waits in the queue.
    load(&gw, 4, 1200);
    gw.signal(rustix::process::Signal::TERM);
    // The process is on its way out, its log writer still blocked on the full pipe: exit
    // waits (up to about a second) for the queue to be written out.
    std::thread::sleep(std::time::Duration::from_millis(300));
    release.send(()).unwrap();
    let (status, log) = gw.stop();
    assert!(status.success(), "{status}");
    assert_eq!(access_lines(&log), 1200, "{}", &log[log.len().saturating_sub(2000)..]);
}

/// The level filter holds for access lines written straight into the queue: at
/// `edgegate::access=warn`, a success (info) writes none and a failed upstream (warn) one.
#[test]
fn access_lines_follow_the_level_filter() {
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let config = format!(
        r#"{PING}
        [[routes]]
        path = "/down"
        upstream = "nowhere"

        [upstreams.nowhere]
        url = "http://{down}"
        "#
    );
    let mut gw =
        Gateway::start_with(&config, &[], &[("EDGEGATE_LOG", "info,edgegate::access=warn")]);
    assert_eq!(get(gw.addr, "/ping").text(), "pong");
    assert_eq!(get(gw.addr, "/down").status, 502);
    let (_, log) = gw.stop();
    let access: Vec<&str> = log.lines().filter(|l| l.contains("edgegate::access")).collect();
    assert_eq!(access.len(), 1, "{log}");
    assert!(access[0].contains(" WARN ") && access[0].contains("path=\"/down\""), "{log}");
}
