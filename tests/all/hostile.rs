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
