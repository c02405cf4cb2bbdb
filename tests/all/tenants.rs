//! Many workers on one node: code loaded by a worker's first request and evicted past
//! `[runtime] max_resident`, and workers deployed through the admin API.

use crate::support::{Gateway, counter, get, post, runtime_section};

/// Two workers of different modules under a cap of one resident module.
fn two_workers_one_resident() -> String {
    format!(
        r#"
        [server]
        server_timing = true

        {runtime}max_resident = 1

        [workers.hostile]
        module = "{hostile}"

        [workers.echo]
        module = "builtin:echo-json"

        [[routes]]
        prefix = "/h"
        worker = "hostile"

        [[routes]]
        path = "/echo"
        worker = "echo"
        "#,
        runtime = runtime_section(),
        hostile = edgegate_guests::HOSTILE,
    )
}

fn stages(reply: &crate::support::Reply) -> Vec<String> {
    let value = reply.header("server-timing").unwrap_or_default();
    value.split(", ").filter_map(|s| s.split(';').next()).map(str::to_owned).collect()
}

#[test]
fn an_evicted_worker_loads_again_on_its_next_request() {
    let gw = Gateway::start(&two_workers_one_resident());
    let event = |e: &str| counter(&gw, &format!("edgegate_worker_code_total{{event=\"{e}\"}}"));
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
    assert_eq!(post(gw.addr, "/echo", b"{\"a\":1}").text(), "{\"a\":1}");
    assert!(event("eviction") >= 1, "one module resident: echo's load evicted hostile's");

    let loads = event("load");
    let again = get(gw.addr, "/h/ok");
    assert_eq!((again.status, again.text().as_str()), (200, "ok"));
    assert_eq!(stages(&again), ["load", "instantiate", "guest"], "it waited for its code");
    assert_eq!(event("load"), loads + 1);

    let resident = get(gw.addr, "/h/ok");
    assert_eq!(stages(&resident), ["instantiate", "guest"], "and now it is resident");
    assert_eq!(counter(&gw, "edgegate_worker_code_resident"), 1);
}
