//! Hostile guests against the real binary: each gets its status and error code, and the
//! gateway keeps serving, the same worker included.

use crate::support::{Gateway, get, runtime_section};

fn config() -> String {
    format!(
        r#"
        {runtime}
        [workers.hostile]
        module = "{hostile}"

        [workers.slow]
        module = "{hostile}"
        limits = {{ cpu = "30s", deadline = "100ms" }}

        # Memory-bound behaviours get CPU to spare, so that on a loaded machine the memory
        # limit, not the 2 ms CPU budget, is what ends them.
        [workers.roomy]
        module = "{hostile}"
        limits = {{ cpu = "10s", deadline = "10s" }}

        [workers.leak]
        module = "{leak}"

        [workers.bad-outcome]
        module = "{bad_outcome}"

        [[routes]]
        prefix = "/h"
        worker = "hostile"

        [[routes]]
        prefix = "/slow"
        worker = "slow"

        [[routes]]
        prefix = "/roomy"
        worker = "roomy"

        [[routes]]
        path = "/leak"
        worker = "leak"

        [[routes]]
        path = "/bad-outcome"
        worker = "bad-outcome"
        "#,
        runtime = runtime_section(),
        hostile = edgegate_guests::HOSTILE,
        leak = edgegate_guests::LEAK,
        bad_outcome = edgegate_guests::BAD_OUTCOME,
    )
}

#[test]
fn each_hostile_guest_gets_its_status_and_the_server_keeps_serving() {
    let mut gw = Gateway::start(&config());
    for (path, status, code) in [
        ("/h/loop", 503, "cpu_budget_exceeded"),
        ("/slow/loop", 504, "deadline_exceeded"),
        ("/roomy/grow", 500, "out_of_memory"),
        ("/roomy/alloc", 500, "out_of_memory"),
        ("/roomy/bomb", 500, "out_of_memory"),
        ("/h/recurse", 500, "stack_overflow"),
        ("/h/trap", 500, "worker_trap"),
        ("/h/panic", 500, "worker_trap"),
        ("/h/hostcalls", 503, "hostcall_budget_exceeded"),
        ("/bad-outcome", 500, "abi_violation"),
    ] {
        let reply = get(gw.addr, path);
        assert_eq!(
            (reply.status, reply.error().as_str()),
            (status, code),
            "{path}: {}",
            reply.text()
        );
        assert_eq!(reply.json()["request_id"].as_str().map(str::len), Some(16), "{path}");
        let text = reply.text();
        assert!(
            !text.contains("wasm") && !text.contains("panic"),
            "{path}: internals leaked: {text}"
        );
        // The same worker, and the gateway, serve the next request normally.
        let ok = get(gw.addr, "/h/ok");
        assert_eq!((ok.status, ok.text().as_str()), (200, "ok"), "after {path}");
    }
    let (status, stderr) = gw.stop();
    assert!(status.success(), "{status}");
    // Guest internals go to the log: the panic message, via the SDK's panic handler.
    assert!(stderr.contains("the hostile guest panics on purpose"), "{stderr}");
}

#[test]
fn request_b_never_sees_what_request_a_wrote() {
    let gw = Gateway::start(&config());
    for _ in 0..3 {
        // A Rust static in linear memory ...
        assert_eq!(get(gw.addr, "/h/leak").text(), "00".repeat(16));
        // ... and a Wasm global plus raw memory.
        assert_eq!(get(gw.addr, "/leak").body, [0u8; 16]);
    }
}

#[test]
fn a_worker_answers_final_statuses_without_connection_or_framing_headers() {
    let mut gw = Gateway::start_with(&config(), &["--log-format", "json"], &[]);
    let mut refused = Vec::new();
    for code in [100, 101, 103, 199, 600] {
        refused.push(format!("/h/status?code={code}"));
    }
    for case in ["crlf", "nul", "connection", "transfer-encoding", "upgrade", "content-length"] {
        refused.push(format!("/h/status?set={case}"));
    }
    for path in &refused {
        let reply = get(gw.addr, path);
        assert_eq!((reply.status, reply.error().as_str()), (500, "invalid_response"), "{path}");
        assert!(reply.header("upgrade").is_none() && reply.header("x-injected").is_none());
    }
    let exact = get(gw.addr, "/h/status?code=201&set=content-length-ok");
    assert_eq!((exact.status, exact.text().as_str()), (201, "status"));
    assert_eq!(exact.header("content-length"), Some("6"));
    let (_, stderr) = gw.stop();
    let sources: Vec<String> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["target"] == "edgegate::access" && l["error"] == "invalid_response")
        .map(|l| l["source"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(sources, vec!["worker"; refused.len()], "each counted as the worker's: {stderr}");
}

#[test]
fn a_guest_cannot_forge_log_lines() {
    for format in ["text", "json"] {
        let mut gw = Gateway::start_with(&config(), &["--log-format", format], &[]);
        assert_eq!(get(gw.addr, "/h/log-inject").status, 200);
        let (_, stderr) = gw.stop();
        assert!(!stderr.contains('\u{1b}'), "{format}: a raw escape reached the log: {stderr:?}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("FORGED")).collect();
        assert_eq!(lines.len(), 1, "{format}: one line, escaped: {stderr}");
        assert!(
            lines[0].contains("first\\") && lines[0].contains("edgegate::guest"),
            "{}",
            lines[0]
        );
        if format == "json" {
            let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
            let message = line["message"].as_str().unwrap();
            assert!(
                message.starts_with("first\\nFORGED") && message.contains("\\u{1b}[31m"),
                "{message}"
            );
        }
    }
}
