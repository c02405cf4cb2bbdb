//! A standard `wasi:http/proxy` component through the real binary: `check` names its ABI; it
//! serves; its limits answer with the statuses and metrics a module's do; its stdout reaches
//! the log, escaped; its outbound requests go through the worker's fetch allow-list, counted,
//! to a real loopback origin.

use crate::cli::check_exact;
use crate::support::{Gateway, counter, get, post, runtime_section, serve_http};

fn config(origin: std::net::SocketAddr) -> String {
    config_with(origin, r#"cpu = "50ms", deadline = "10s", subrequests = 3"#)
}

/// [`config`] with `limits` for the `component` worker.
fn config_with(origin: std::net::SocketAddr, limits: &str) -> String {
    format!(
        r#"
        {runtime}
        [workers.component]
        module = "{component}"
        fetch = ["http://{origin}"]
        limits = {{ {limits} }}

        [workers.waiting]
        module = "{component}"
        limits = {{ cpu = "200ms", deadline = "300ms" }}

        [[routes]]
        path = "/sleep"
        worker = "waiting"

        [[routes]]
        prefix = "/"
        worker = "component"
        "#,
        runtime = runtime_section(),
        component = edgegate_guests::HTTP_COMPONENT,
    )
}

fn origin() -> std::net::SocketAddr {
    serve_http(|_, _| b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\norigin".to_vec())
}

#[test]
fn check_names_a_component_s_abi_and_interfaces() {
    let (code, stdout, stderr) = check_exact(&config(origin()));
    assert_eq!(code, Some(0), "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("worker component:")).unwrap_or("");
    assert!(line.contains("wasi:http/proxy component"), "{stdout}");
    assert!(line.contains("wasi:http/types@0.2"), "{line}");
}

#[test]
fn a_component_serves_and_its_limits_answer_as_a_module_s_do() {
    let mut gw = Gateway::start(&config(origin()));
    let hello = get(gw.addr, "/hello");
    assert_eq!((hello.status, hello.text().as_str()), (200, "hello from a component"));
    assert_eq!(hello.header("x-kind"), Some("component"));
    let echoed = post(gw.addr, "/echo", b"streamed back in small writes");
    assert_eq!(echoed.text(), "streamed back in small writes");
    assert_eq!(get(gw.addr, "/status/418").status, 418);

    for (reply, status, code) in [
        (get(gw.addr, "/spin"), 503, "cpu_budget_exceeded"),
        (get(gw.addr, "/alloc/8"), 500, "out_of_memory"),
        (get(gw.addr, "/panic"), 500, "worker_trap"),
        (get(gw.addr, "/sleep"), 504, "deadline_exceeded"),
    ] {
        assert_eq!((reply.status, reply.error().as_str()), (status, code), "{}", reply.text());
        assert_eq!(get(gw.addr, "/hello").status, 200, "after {code}");
    }
    for (worker, limit) in [("component", "cpu"), ("component", "memory"), ("waiting", "deadline")]
    {
        let series = format!("edgegate_limit_hits_total{{worker=\"{worker}\",limit=\"{limit}\"}}");
        assert_eq!(counter(&gw, &series), 1, "{series}");
    }

    assert_eq!(get(gw.addr, "/log").text(), "logged");
    let (status, stderr) = gw.stop();
    assert!(status.success(), "{status}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("edgegate::guest")).collect();
    assert!(lines.iter().any(|l| l.contains("to stdout") && l.contains("stdout")), "{stderr}");
    assert!(lines.iter().any(|l| l.contains("to stderr") && l.contains("stderr")), "{stderr}");
    // The escape sequence the guest wrote is shown, not sent to the terminal.
    assert!(lines.iter().any(|l| l.contains("second\\u{1b}[31m line")), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "an escape reached the log");
}

#[test]
fn a_component_s_fetches_follow_the_allow_list_and_the_cap_and_are_counted() {
    let origin = origin();
    let gw = Gateway::start(&config(origin));
    let allowed = get(gw.addr, &format!("/fetch?http://{origin}/x"));
    assert_eq!(allowed.text(), "200 origin");
    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let denied = get(gw.addr, &format!("/fetch?http://{elsewhere}/x"));
    assert_eq!((denied.status, denied.text().as_str()), (502, "ErrorCode::HttpRequestDenied"));
    let many = get(gw.addr, &format!("/fetch-many/5?http://{origin}/y"));
    assert_eq!(many.text(), "3 Some(ErrorCode::ConnectionLimitReached)");
    let fetches = |outcome: &str| {
        counter(
            &gw,
            &format!("edgegate_fetches_total{{worker=\"component\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!([fetches("ok"), fetches("denied"), fetches("limit")], [4, 1, 2]);
}

#[test]
fn a_component_compiles_ahead_of_time_and_serves_from_its_cwasm() {
    let dir = tempfile::tempdir().unwrap();
    let cwasm = dir.path().join("component.cwasm");
    let out = crate::cli::edgegate(&[
        "compile",
        edgegate_guests::HTTP_COMPONENT,
        "-o",
        cwasm.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = format!(
        "{}\n[workers.c]\nmodule = {:?}\n[[routes]]\nprefix = \"/\"\nworker = \"c\"\n",
        runtime_section(),
        cwasm.display().to_string()
    );
    let (code, stdout, stderr) = check_exact(&config);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("(precompiled): wasi:http/proxy component"), "{stdout}");
    let gw = Gateway::start(&config);
    assert_eq!(get(gw.addr, "/hello").text(), "hello from a component");
}

/// The outside test's component attacks through the binary: header maps built in the host
/// by many requests at once stay within each request's memory limit (and are the worker's
/// `out_of_memory`), too many random bytes at once are the worker's fault, and an unfinished
/// answer is an error, not a truncated 200.
#[test]
fn what_a_component_makes_the_host_hold_is_bounded_and_its_fault() {
    let limits = r#"memory = "8MiB", cpu = "2s", deadline = "20s", hostcalls = 1000000"#;
    let mut gw = Gateway::start(&config_with(origin(), limits));
    let vm = |field: &str| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", gw.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(get(gw.addr, "/hello").status, 200);
    let before = vm("VmHWM:");
    // 16 at once, each building 900 maps of 56 KiB (50 MB) against its 8 MiB.
    let addr = gw.addr;
    let bombs: Vec<_> =
        (0..16).map(|_| std::thread::spawn(move || get(addr, "/fields/900/56"))).collect();
    for bomb in bombs {
        let reply = bomb.join().unwrap();
        assert_eq!((reply.status, reply.error().as_str()), (500, "out_of_memory"));
    }
    let grown = (vm("VmHWM:") - before) >> 10;
    assert!(grown < 16 * 8 + 64, "the peak grew {grown} MiB for 16 requests of 8 MiB");

    let random = get(gw.addr, "/random/1/1024");
    assert_eq!((random.status, random.error().as_str()), (500, "worker_trap"));
    let unfinished = get(gw.addr, "/unfinished");
    assert_eq!((unfinished.status, unfinished.error().as_str()), (500, "worker_error"));
    assert!(!unfinished.text().contains("the first half"), "{}", unfinished.text());
    assert_eq!(get(gw.addr, "/hello").status, 200);
    let (_, log) = gw.stop();
    assert!(log.contains(r#"source="worker" error="out_of_memory""#), "{log}");
    assert!(log.contains(r#"source="worker" error="worker_trap""#), "{log}");
    assert!(!log.contains("internal_error"), "{log}");
}

/// A component built the usual way (wasm32-wasip2, wit-bindgen) reaches the gateway's KV
/// namespaces through `wasi:keyvalue` and its config table through `wasi:config/store`: what
/// it writes to a Redis namespace a core module reads, and a second gateway too; each call is
/// counted as a module's are; Redis down is an error the guest sees and answers, and the
/// gateway goes on serving.
#[test]
fn a_component_uses_kv_in_redis_and_config_through_the_standard_interfaces() {
    let Some(component) = edgegate_guests::wasip2_std() else { return };
    let Some(redis) = edgegate_testkit::redis::RedisServer::start("component_kv") else { return };
    let config = format!(
        r#"
        {runtime}
        [kv.shared]
        backend = "redis"
        url = {url:?}
        timeout = "200ms"

        [kv.local]

        [workers.std]
        module = "{component}"
        kv = ["shared", "local"]
        config = {{ greeting = "hello", region = "eu" }}
        limits = {{ cpu = "500ms" }}

        [workers.core]
        module = "builtin:kv-lookup"
        kv = ["shared"]
        config = {{ namespace = "shared", prefix = "/core/" }}

        [[routes]]
        prefix = "/core/"
        worker = "core"

        [[routes]]
        prefix = "/"
        worker = "std"
        "#,
        runtime = runtime_section(),
        url = redis.url(),
    );
    let (code, stdout, stderr) = check_exact(&config);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("wasi:keyvalue/store@0.2.0-draft"), "{stdout}");
    assert!(stdout.contains("wasi:config/store@0.2.0-rc.1"), "{stdout}");

    let one = Gateway::start(&config);
    let two = Gateway::start(&config);
    let put = |gw: &Gateway, path: &str, body: &[u8]| {
        crate::support::http(gw.addr, "PUT", path, &[], body)
    };
    assert_eq!(put(&one, "/kv/shared/user:1", b"ada").status, 204);
    assert_eq!(get(one.addr, "/kv/shared/user:1").text(), "ada");
    assert_eq!(
        get(one.addr, "/core/user:1").text(),
        "ada",
        "a module reads what a component wrote"
    );
    assert_eq!(get(two.addr, "/kv/shared/user:1").text(), "ada", "and another gateway");
    assert_eq!(post(two.addr, "/incr/shared/hits?3", b"").text(), "3");
    assert_eq!(post(one.addr, "/incr/shared/hits?4", b"").text(), "7");
    // A memory namespace is this process's own.
    assert_eq!(put(&one, "/kv/local/k", b"v").status, 204);
    assert_eq!(get(one.addr, "/kv/local/k").text(), "v");
    assert_eq!(get(two.addr, "/kv/local/k").status, 404);
    let ungranted = get(one.addr, "/kv/elsewhere/k");
    assert_eq!(ungranted.status, 502);
    assert!(
        ungranted.text().contains(r#"no KV namespace \"elsewhere\" is granted"#),
        "{}",
        ungranted.text()
    );

    assert_eq!(get(one.addr, "/config/greeting").text(), "hello");
    assert_eq!(get(one.addr, "/config").text(), "greeting=hello\nregion=eu\n");

    let ops = |op: &str| {
        counter(
            &one,
            &format!("edgegate_kv_operations_total{{backend=\"redis\",op=\"{op}\",result=\"ok\"}}"),
        )
    };
    // The module's get is counted beside the component's.
    assert_eq!([ops("put"), ops("get"), ops("incr")], [1, 2, 1]);

    redis.kill();
    let down = get(one.addr, "/kv/shared/user:1");
    assert_eq!(down.status, 502, "{}", down.text());
    assert!(
        down.text().contains("store unavailable") || down.text().contains("did not answer"),
        "{}",
        down.text()
    );
    assert_eq!(get(one.addr, "/kv/local/k").text(), "v", "the gateway serves on");
}

/// `GET path` on a connection of its own, read to its end a `chunk` at a time with `pause`
/// between reads: the head, and the chunked body decoded with whether its last chunk came.
fn read_chunked(
    addr: std::net::SocketAddr,
    path: &str,
    chunk: usize,
    pause: std::time::Duration,
) -> (String, Vec<u8>, bool) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut buf = vec![0; chunk];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
        std::thread::sleep(pause);
    }
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let (mut body, mut rest, mut whole) = (Vec::new(), &raw[end..], false);
    while let Some(line) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            whole = true;
            break;
        }
        let data = &rest[line + 2..];
        if data.len() < size + 2 {
            body.extend_from_slice(data);
            break;
        }
        body.extend_from_slice(&data[..size]);
        rest = &data[size + 2..];
    }
    (head, body, whole)
}

/// A component's answer past its 64 KiB buffer streams through the binary, chunked, to a slow
/// reader as to a fast one; over `response_body` once streaming, it is cut (no last chunk),
/// never ended as if whole, and logged; the instance slot comes back either way.
#[test]
fn a_component_s_long_answer_streams_and_a_failure_cuts_it() {
    let limits = r#"response_body = "1MiB", memory = "8MiB", cpu = "500ms", deadline = "20s", hostcalls = 100000"#;
    let mut gw = Gateway::start(&config_with(origin(), limits));
    let big = |kib: usize| -> Vec<u8> { (0..kib << 10).map(|i| (i % 251) as u8).collect() };
    let pause = std::time::Duration::from_millis(2);
    let (head, body, whole) = read_chunked(gw.addr, "/big/768", 16 << 10, pause);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
    assert!(whole && body == big(768), "{} bytes, whole: {whole}", body.len());

    let (head, body, whole) = read_chunked(gw.addr, "/big/2048", 64 << 10, Default::default());
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!whole, "a cut answer has no last chunk");
    assert!(body.len() <= 1 << 20 && body == big(2048)[..body.len()], "{} bytes", body.len());
    let (head, _, whole) =
        read_chunked(gw.addr, "/big-then-trap/256", 64 << 10, Default::default());
    assert!(head.starts_with("HTTP/1.1 200") && !whole, "{head}");

    assert_eq!(get(gw.addr, "/hello").status, 200);
    let slots = crate::support::metric_line(&gw, "edgegate_instance_slots_in_use ");
    assert_eq!(slots.as_deref(), Some("edgegate_instance_slots_in_use 0"));
    let (_, log) = gw.stop();
    let cut: Vec<&str> = log.lines().filter(|l| l.contains("the answer was cut off")).collect();
    assert_eq!(cut.len(), 2, "{log}");
    assert!(cut[0].contains("response_too_large") && cut[1].contains("worker_trap"), "{cut:?}");
}
