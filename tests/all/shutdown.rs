//! Graceful shutdown: on SIGTERM or SIGINT the gateway stops accepting, finishes what is in
//! flight, and exits 0.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use rustix::process::Signal;

use crate::support::{
    Gateway, counter, get, metric_total, read_one, read_reply, spinning_hostile, wait_until,
};

fn config() -> String {
    spinning_hostile("", "")
}

#[test]
fn sigterm_drains_in_flight_requests_then_exits_0() {
    let mut gw = Gateway::start(&config());
    let (addr, admin) = (gw.addr, gw.admin);
    let in_flight = std::thread::spawn(move || get(addr, "/h/spin?ms=2000"));
    wait_until("the request is in flight", || {
        metric_total(&gw, "edgegate_instance_slots_in_use") == 1
    });
    gw.signal(Signal::TERM);
    // The listeners close before /healthz says the gateway drains.
    wait_until("/healthz says draining", || get(admin, "/healthz").status == 503);

    // Draining: no new connections, and health checks say so.
    assert!(TcpStream::connect(addr).is_err(), "still accepting after SIGTERM");
    assert_eq!(get(admin, "/healthz").status, 503);

    let reply = in_flight.join().unwrap();
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (200, "spun"),
        "the in-flight request finished"
    );
    let status = gw.wait(Duration::from_secs(30)).expect("exits after draining");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn sigint_exits_0() {
    let mut gw = Gateway::start(&config());
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
    gw.signal(Signal::INT);
    let status = gw.wait(Duration::from_secs(30)).expect("exits on SIGINT");
    assert_eq!(status.code(), Some(0));
}

/// The handlers are in place once the addresses are printed: a supervisor that signals at
/// once still gets a clean exit, not death by the default action (`code()` would be `None`).
#[test]
fn a_signal_right_after_startup_still_exits_0() {
    for signal in [Signal::INT, Signal::TERM] {
        let mut gw = Gateway::start(&config());
        gw.signal(signal);
        let status = gw.wait(Duration::from_secs(30)).expect("exits on the signal");
        assert_eq!(status.code(), Some(0), "after {signal:?}");
    }
}

/// A connection accepted just before the drain whose request has not arrived yet, and a
/// keep-alive connection between two requests, are not closed under the client: the next
/// request on each is answered, with `Connection: close`, and then the connection closes.
#[test]
fn a_drain_answers_the_next_request_on_a_fresh_or_keep_alive_connection() {
    let mut gw = Gateway::start(&config());
    let addr = gw.addr;
    let request = b"GET /h/ok HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let mut fresh = TcpStream::connect(addr).unwrap();
    let mut kept = TcpStream::connect(addr).unwrap();
    for stream in [&fresh, &kept] {
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }
    kept.write_all(request).unwrap();
    let first = read_one(&mut kept);
    assert!(first.starts_with("http/1.1 200") && !first.contains("connection: close"), "{first}");
    wait_until("both connections are accepted", || {
        counter(&gw, "edgegate_connections_open{listener=\"http\"}") == 2
    });
    gw.signal(Signal::TERM);
    wait_until("/healthz says draining", || get(gw.admin, "/healthz").status == 503);

    for (name, stream) in [("fresh", &mut fresh), ("keep-alive", &mut kept)] {
        stream.write_all(request).unwrap();
        let reply = read_reply(stream);
        assert_eq!(reply.status, 200, "{name}");
        assert_eq!(reply.header("connection"), Some("close"), "{name}");
    }
    let status = gw.wait(Duration::from_secs(30)).expect("exits after draining");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn per_core_serves_from_a_thread_per_cpu_and_drains_every_one() {
    let mut gw = Gateway::start(&spinning_hostile(r#"scheduler = "per-core""#, ""));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = || {
        std::fs::read_dir(format!("/proc/{}/task", gw.pid()))
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|name| name.starts_with("edgegate-core-"))
            .count()
    };
    // The threads start as the server runs, just after it announced its addresses.
    wait_until("a thread for every CPU but the first", || threads() == cpus - 1);
    // New connections land on every thread's listener (the kernel chooses): all answer.
    for _ in 0..16 {
        assert_eq!(get(gw.addr, "/h/ok").status, 200);
    }
    // Requests in flight on several connections: the drain waits for each, wherever it runs.
    let addr = gw.addr;
    let in_flight: Vec<_> =
        (0..4).map(|_| std::thread::spawn(move || get(addr, "/h/spin?ms=1500"))).collect();
    wait_until("the requests are in flight", || {
        metric_total(&gw, "edgegate_instance_slots_in_use") == 4
    });
    gw.signal(Signal::TERM);
    for request in in_flight {
        let reply = request.join().unwrap();
        assert_eq!((reply.status, reply.text().as_str()), (200, "spun"));
    }
    let (status, stderr) = gw.stop();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("drained") && !stderr.contains("shutdown timeout"), "{stderr}");
}
