//! Connections that never become requests, or stop being ones, over raw loopback sockets:
//! silent sockets, a half-sent h2 preface, h2 without SETTINGS or without a stream, a header
//! block that never ends, PINGs that go unanswered, and idle keep-alive connections; the
//! same on the admin listener, its connection cap, and a process out of file descriptors.
//!
//! Each test gives the server far longer than the timeout under test to close the socket, and
//! fails if it does not: without the timeouts, these sockets are held forever.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Gateway, get, read_reply, spinning_hostile, write_config};

/// Far longer than any timeout these tests set, far shorter than forever.
const PATIENCE: Duration = Duration::from_secs(15);

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: u8 = 0x4;
const HEADERS: u8 = 0x1;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const END_HEADERS: u8 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK block for `METHOD /h/PATH` on localhost, literals without indexing.
fn request_headers(method: u8, path: &str) -> Vec<u8> {
    let mut block = vec![method, 0x86]; // :method (2 GET, 3 POST), :scheme http
    block.extend_from_slice(&[0x04, path.len() as u8]); // :path, a literal
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 9]); // :authority
    block.extend_from_slice(b"localhost");
    block
}

fn connect(addr: SocketAddr, first: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(first).unwrap();
    stream
}

/// Reads until the server closes; panics if it has not within [`PATIENCE`].
fn closed_by_server(stream: &mut TcpStream, what: &str) -> Vec<u8> {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return received,
            Err(e) => panic!("{what}: the server did not close the connection: {e}"),
        }
    }
}

/// The frame types in what an h2 server sent.
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        types.push(bytes[3]);
        bytes = &bytes[(9 + len).min(bytes.len())..];
    }
    types
}

#[test]
fn connections_that_never_finish_their_handshake_are_closed() {
    let gw = Gateway::start(&spinning_hostile("handshake_timeout = \"500ms\"", ""));
    let mut cases = [
        ("a silent socket", connect(gw.addr, b"")),
        ("22 bytes of the h2 preface", connect(gw.addr, &PREFACE[..22])),
        ("a preface without SETTINGS", connect(gw.addr, PREFACE)),
    ];
    for (what, stream) in &mut cases {
        closed_by_server(stream, what);
    }
    let ok = get(gw.addr, "/h/ok");
    assert_eq!(ok.status, 200);
    let metrics = get(gw.admin, "/metrics").text();
    assert!(
        metrics.contains(r#"edgegate_connections_closed_total{reason="handshake_timeout"} 3"#),
        "{metrics}"
    );
}

#[test]
fn silent_sockets_at_max_connections_do_not_lock_out_a_new_client() {
    let gw =
        Gateway::start(&spinning_hostile("max_connections = 10\nhandshake_timeout = \"1s\"", ""));
    let mut silent: Vec<TcpStream> = (0..10).map(|_| connect(gw.addr, b"")).collect();
    // The eleventh waits in the accept queue until the first-byte timeout frees a slot.
    let mut client =
        connect(gw.addr, b"GET /h/ok HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    client.set_read_timeout(Some(PATIENCE)).unwrap();
    let reply = read_reply(&mut client);
    assert_eq!((reply.status, reply.text().as_str()), (200, "ok"));
    for stream in &mut silent {
        closed_by_server(stream, "a silent socket");
    }
}

#[test]
fn an_h2_connection_that_opens_no_stream_gets_goaway_then_is_closed() {
    let gw = Gateway::start(&spinning_hostile("idle_timeout = \"500ms\"", ""));
    let mut stream = connect(gw.addr, &[PREFACE, &frame(SETTINGS, 0, 0, &[])].concat());
    let sent = closed_by_server(&mut stream, "an idle h2 connection");
    let types = frame_types(&sent);
    assert!(types.contains(&GOAWAY), "GOAWAY before the close: {types:?}");
}

#[test]
fn an_h2_header_block_that_never_ends_is_closed() {
    // The idle timeout is far away: only the header timeout can close this in time.
    let gw = Gateway::start(&spinning_hostile(
        "header_read_timeout = \"500ms\"\nidle_timeout = \"1h\"",
        "",
    ));
    let headers = frame(HEADERS, 0, 1, &request_headers(0x82, "/h/ok"));
    let mut stream = connect(gw.addr, &[PREFACE, &frame(SETTINGS, 0, 0, &[]), &headers].concat());
    closed_by_server(&mut stream, "a HEADERS frame without END_HEADERS");
    // The same, but the whole block arrives: served.
    let headers = frame(HEADERS, END_HEADERS | 0x1, 1, &request_headers(0x82, "/h/ok"));
    let mut stream = connect(gw.addr, &[PREFACE, &frame(SETTINGS, 0, 0, &[]), &headers].concat());
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 4096];
    let mut sent = Vec::new();
    while !frame_types(&sent).contains(&HEADERS) {
        let n = stream.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before answering");
        sent.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn unanswered_h2_pings_close_the_connection() {
    // A request stays in flight (its body never comes), so neither the idle timeout nor the
    // body timeout can close the connection in time: only the PINGs can.
    let gw = Gateway::start(&spinning_hostile(
        "h2_keepalive_interval = \"300ms\"\nh2_keepalive_timeout = \"300ms\"\n\
         idle_timeout = \"1h\"\nbody_read_timeout = \"1h\"",
        "",
    ));
    let headers = frame(HEADERS, END_HEADERS, 1, &request_headers(0x83, "/h/ok"));
    let mut stream = connect(gw.addr, &[PREFACE, &frame(SETTINGS, 0, 0, &[]), &headers].concat());
    let sent = closed_by_server(&mut stream, "a peer that answers no PING");
    let types = frame_types(&sent);
    assert!(types.contains(&PING), "pinged before the close: {types:?}");
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let gw = Gateway::start(&spinning_hostile(
        "idle_timeout = \"500ms\"\nheader_read_timeout = \"1h\"",
        "",
    ));
    let mut stream = connect(gw.addr, b"GET /h/ok HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let sent = closed_by_server(&mut stream, "an idle HTTP/1.1 connection");
    assert!(sent.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&sent));
}

#[test]
fn a_client_that_stops_reading_its_response_is_closed() {
    let gw = Gateway::start(&spinning_hostile(
        "idle_timeout = \"1s\"",
        r#", response_body = "16MiB", memory = "64MiB""#,
    ));
    let size = 16 << 20;
    let request = format!("GET /h/bytes?n={size} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut stream = connect(gw.addr, request.as_bytes());
    // More than the socket buffers hold: the gateway's writes block while nobody reads.
    std::thread::sleep(Duration::from_secs(5));
    let received = closed_by_server(&mut stream, "a client that reads nothing");
    assert!(received.len() < size, "cut off, not sent whole: {} bytes", received.len());
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
}

/// The admin listener has the main one's timeouts: silent sockets and heads that never end
/// are closed, not kept.
#[test]
fn silent_and_unfinished_admin_connections_are_closed() {
    let server = "handshake_timeout = \"500ms\"\nheader_read_timeout = \"500ms\"";
    let gw = Gateway::start(&spinning_hostile(server, ""));
    let mut streams: Vec<(&str, TcpStream)> = Vec::new();
    for _ in 0..20 {
        streams.push(("a silent admin socket", connect(gw.admin, b"")));
        streams
            .push(("half an admin request head", connect(gw.admin, b"GET /healthz HTTP/1.1\r\n")));
    }
    for (what, stream) in &mut streams {
        closed_by_server(stream, what);
    }
    assert_eq!(get(gw.admin, "/healthz").status, 200);
}

/// At `admin_max_connections`, a further admin client waits in the accept queue (until the
/// first-byte timeout frees a place) while the main port serves at once.
#[test]
fn the_admin_listener_has_its_own_connection_cap() {
    let server = "admin_max_connections = 4\nhandshake_timeout = \"1s\"";
    let gw = Gateway::start(&spinning_hostile(server, ""));
    let mut silent: Vec<TcpStream> = (0..4).map(|_| connect(gw.admin, b"")).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut waiting =
        connect(gw.admin, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    waiting.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0u8; 64];
    assert!(waiting.read(&mut buf).is_err(), "answered past the cap");
    assert_eq!(get(gw.addr, "/h/ok").status, 200, "the main port is not held");
    waiting.set_read_timeout(Some(PATIENCE)).unwrap();
    assert_eq!(read_reply(&mut waiting).status, 200);
    for stream in &mut silent {
        closed_by_server(stream, "a silent admin socket");
    }
}

/// A start with an open-file limit that cannot hold the configured load stops with the
/// figures; one whose soft limit is too low but whose hard limit is not raises the soft one.
#[test]
fn the_open_file_limit_is_checked_at_start() {
    let config = spinning_hostile("", "");
    let (_dir, path) = write_config(&config);
    let mut command = Command::new(env!("CARGO_BIN_EXE_edgegate"));
    command.args(["serve", "--config", path.to_str().unwrap()]);
    command.args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"]);
    let limit = rustix::process::Rlimit { current: Some(1000), maximum: Some(1000) };
    // SAFETY: setrlimit is async-signal-safe and touches no memory of this process.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("serve started under a limit that cannot hold its load");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    for figure in ["the open-file limit is 1000", "server.max_connections", "runtime.max_resident"]
    {
        assert!(stderr.contains(figure), "{figure}: {stderr}");
    }

    // A soft limit too low under a hard one that is not: raised to what the load needs (the
    // default 4096 + 64 connections, one resident worker, 256 running requests' outbound
    // connections, 64 of the process's own), and served.
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum.unwrap();
    assert!(hard >= 4481, "this test needs a hard limit of at least 4481, not {hard}");
    let gw = Gateway::start_with_open_files(&config, 256, hard);
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", gw.pid())).unwrap();
    let soft = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    assert_eq!(soft.split_whitespace().nth(3), Some("4481"), "{soft}");
}

/// Out of file descriptors, the accept loops wait longer each time instead of spinning (the
/// admin loop retried at once, a core's worth a second), count it, and serve again once
/// descriptors are free.
#[test]
fn out_of_file_descriptors_the_accept_loops_back_off() {
    // Start-up checks the limit holds the configured load; it is lowered afterwards, as if
    // something else took the descriptors.
    let gw = Gateway::start(&spinning_hostile("", ""));
    gw.limit_open_files(96);
    // Silent connections until the process has no descriptor left; the rest wait in the
    // kernel's queues, the admin one's included.
    let held: Vec<TcpStream> = (0..150).map(|_| connect(gw.addr, b"")).collect();
    // The admin's connections come once the HTTP listener has taken every descriptor, or a
    // slow server would accept them first.
    let fds = format!("/proc/{}/fd", gw.pid());
    let open = || std::fs::read_dir(&fds).map_or(0, Iterator::count);
    let deadline = Instant::now() + Duration::from_secs(10);
    while open() < 96 {
        assert!(Instant::now() < deadline, "{} descriptors open, of 96", open());
        std::thread::sleep(Duration::from_millis(10));
    }
    let queued: Vec<TcpStream> = (0..3).map(|_| connect(gw.admin, b"")).collect();
    std::thread::sleep(Duration::from_secs(3));
    drop((held, queued));
    // Descriptors come back as the server sees those connections end.
    let metrics = get(gw.admin, "/metrics").text();
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
    let failures = |listener: &str| {
        let series =
            format!("edgegate_accept_errors_total{{listener=\"{listener}\",reason=\"emfile\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()).and_then(|n| n.parse::<u64>().ok()))
            .unwrap_or(0)
    };
    // 3 s of waits of 10 ms, 20 ms, … up to 1 s: about ten failures a listener.
    for listener in ["http", "admin"] {
        let n = failures(listener);
        assert!((1..=30).contains(&n), "{listener}: {n} failed accepts in 3 s\n{metrics}");
    }
}
