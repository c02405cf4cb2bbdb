//! Server-wide request limits over real sockets: header count and size, body size, slow
//! clients, and the concurrency limit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::{Gateway, Reply, get, http, metric_total, spinning_hostile, wait_until};

fn config(server: &str) -> String {
    spinning_hostile(server, r#", request_body = "1KiB""#)
}

#[test]
fn oversized_requests_are_refused_with_their_status() {
    let gw = Gateway::start(&config("max_headers = 10\nmax_header_bytes = \"8KiB\""));
    let body = vec![b'x'; 1025];
    let reply = http(gw.addr, "POST", "/h/ok", &[], &body);
    assert_eq!((reply.status, reply.error().as_str()), (413, "body_too_large"));
    assert_eq!(http(gw.addr, "POST", "/h/ok", &[], &body[..1024]).status, 200);

    let many: Vec<(String, String)> = (0..20).map(|i| (format!("x-h{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(http(gw.addr, "GET", "/h/ok", &many, b"").status, 431);

    let long = "v".repeat(9000);
    assert_eq!(http(gw.addr, "GET", "/h/ok", &[("x-long", &long)], b"").status, 431);
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
}

#[test]
fn a_client_whose_headers_never_finish_is_dropped_while_others_are_served() {
    let gw = Gateway::start(&config("header_read_timeout = \"500ms\""));
    let mut slow = TcpStream::connect(gw.addr).unwrap();
    slow.write_all(b"GET /h/ok HTTP/1.1\r\nHost: localhost\r\nX-Partial: yes").unwrap();
    for _ in 0..3 {
        assert_eq!(get(gw.addr, "/h/ok").status, 200, "other clients are served meanwhile");
    }
    // Far longer than the timeout: the server must close first, whatever it sends before.
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut rest = Vec::new();
    match slow.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the slow connection was not dropped: {e}"),
    }
    assert!(
        rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"),
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
}

#[test]
fn past_the_concurrency_limit_requests_get_503_with_retry_after() {
    let gw = Gateway::start(&config("max_concurrency = 1\nqueue_timeout = \"50ms\""));
    let busy = spin_holding_a_slot(&gw);
    assert_overloaded(&get(gw.addr, "/h/ok"));
    assert_eq!(busy.join().unwrap(), 200);
    assert_eq!(get(gw.addr, "/h/ok").status, 200, "the slot is free again");
}

#[test]
fn a_worker_past_its_share_of_the_slots_gets_503_and_the_others_are_served() {
    let share = "max_concurrency = 1\n\n[workers.echo]\nmodule = \"builtin:echo-json\"\n\n\
                 [[routes]]\npath = \"/echo\"\nworker = \"echo\"\n";
    let gw = Gateway::start(&crate::support::spinning_hostile_with(
        "max_concurrency = 4\nqueue_timeout = \"50ms\"",
        "",
        share,
    ));
    let busy = spin_holding_a_slot(&gw);
    assert_overloaded(&get(gw.addr, "/h/ok"));
    let echo = crate::support::post(gw.addr, "/echo", b"[1, 2]");
    assert_eq!((echo.status, echo.text().as_str()), (200, "[1,2]"), "another worker is served");
    // A reload that keeps the share keeps the request holding it.
    assert_eq!(crate::support::reload(&gw, None).status, 200);
    assert_eq!(get(gw.addr, "/h/ok").status, 503, "the share outlived the reload");
    assert_eq!(busy.join().unwrap(), 200);
    assert_eq!(get(gw.addr, "/h/ok").status, 200, "its place is free again");
}

/// Starts a 2.5 s spin on `/h/spin` and waits until it holds an instance slot; the handle
/// gives its status.
fn spin_holding_a_slot(gw: &Gateway) -> std::thread::JoinHandle<u16> {
    let addr = gw.addr;
    let busy = std::thread::spawn(move || get(addr, "/h/spin?ms=2500").status);
    wait_until("the slow request holds a slot", || {
        metric_total(gw, "edgegate_instance_slots_in_use") == 1
    });
    busy
}

/// A request refused for want of a place: 503 `overloaded`, to be retried in a second.
fn assert_overloaded(reply: &Reply) {
    assert_eq!((reply.status, reply.error().as_str()), (503, "overloaded"));
    assert_eq!(reply.header("retry-after"), Some("1"));
}
