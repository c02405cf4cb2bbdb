//! Many workers on one node: code loaded by a worker's first request and evicted past
//! `[runtime] max_resident`, and workers deployed through the admin API.

use crate::support::{
    Gateway, admin_api as api, counter, deploy_form as form, get, post, runtime_section,
};

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

const TOKEN: &str = "deploy-secret-0123456789abcdef0123456789";

/// A site whose admin API deploys into `deployed/`, with one worker of its own at `/echo`.
fn deploy_site() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edgegate.toml");
    let text = format!(
        r#"
        {runtime}
        [deploy]
        dir = "deployed"

        [deploy.caps]
        module = "64KiB"
        memory = "32MiB"
        routes = 2

        [workers.echo]
        module = "builtin:echo-json"

        [[routes]]
        name = "echo"
        path = "/echo"
        worker = "echo"
        "#,
        runtime = runtime_section(),
    );
    std::fs::write(&config, text).unwrap();
    std::fs::write(dir.path().join("echo.wasm"), edgegate_guests::ECHO_JSON).unwrap();
    std::fs::copy(edgegate_guests::HOSTILE, dir.path().join("hostile.wasm")).unwrap();
    std::fs::write(dir.path().join("broken.wasm"), b"\0asm\x01\0\0\0 but not really").unwrap();
    (dir, config)
}

fn listed(gw: &Gateway) -> serde_json::Value {
    let (status, body) = api(gw, "GET", "/workers", Some(TOKEN), &[]);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn the_workers_api_deploys_replaces_and_removes_workers_and_a_restart_keeps_them() {
    let (dir, config) = deploy_site();
    let d = dir.path();
    let env = [("EDGEGATE_ADMIN_TOKEN", TOKEN)];
    let mut gw = Gateway::start_at(&config, &env);
    let hello = "[worker]\nlimits = { memory = \"16MiB\" }\n[[routes]]\npath = \"/hello\"\n";

    // Only with the token.
    assert_eq!(api(&gw, "PUT", "/workers/hello", None, &form(d, hello, Some("echo.wasm"))).0, 401);
    assert_eq!(
        api(&gw, "PUT", "/workers/hello", Some("wrong"), &form(d, hello, Some("echo.wasm"))).0,
        401
    );
    assert_eq!(post(gw.addr, "/hello", b"{}").status, 404);

    let (status, body) =
        api(&gw, "PUT", "/workers/hello", Some(TOKEN), &form(d, hello, Some("echo.wasm")));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"changed\":[\"hello\"]"), "{body}");
    assert_eq!(post(gw.addr, "/hello", b"{\"a\":1}").text(), "{\"a\":1}");
    let workers = listed(&gw);
    let hello_listed = workers["workers"].as_array().unwrap().iter().find(|w| w["name"] == "hello");
    let hello_listed = hello_listed.unwrap_or_else(|| panic!("{workers}"));
    assert_eq!(hello_listed["deployed"], true);
    assert_eq!(hello_listed["routes"], serde_json::json!(["hello[0]"]));
    assert!(d.join("deployed/hello.toml").exists());

    // Refused, each with its reason, and the deployed version serves on.
    let refused = |name: &str, worker: &str, module: Option<&str>| {
        api(&gw, "PUT", &format!("/workers/{name}"), Some(TOKEN), &form(d, worker, module))
    };
    let (status, body) = refused("hello", hello, Some("broken.wasm"));
    assert_eq!(status, 422, "a module that does not compile: {body}");
    assert!(body.contains("invalid_worker"), "{body}");
    let (status, body) =
        refused("other", "[worker]\n[[routes]]\npath = \"/echo\"\n", Some("echo.wasm"));
    assert_eq!(status, 422, "a route the file's worker has: {body}");
    assert!(body.contains("would take requests that the configuration file serves"), "{body}");
    // A clash with another deployed worker is reported against the one being deployed.
    let (status, body) =
        refused("another", "[worker]\n[[routes]]\npath = \"/hello\"\n", Some("echo.wasm"));
    assert_eq!(status, 422, "a route a deployed worker has: {body}");
    assert!(
        body.contains("another.toml: routes[0]: matches the same requests as route `hello[0]`"),
        "{body}"
    );
    let (status, body) = refused("echo", hello, Some("echo.wasm"));
    assert_eq!(status, 409, "the configuration file's worker: {body}");
    let (status, body) = refused("big", hello, Some("hostile.wasm"));
    assert_eq!(status, 413, "over deploy.caps.module: {body}");
    let (status, body) =
        refused("greedy", "[worker]\nlimits = { memory = \"64MiB\" }\n", Some("echo.wasm"));
    assert_eq!(status, 422, "over deploy.caps.memory: {body}");
    assert!(body.contains("caps.memory") && body.contains("(deploy)"), "{body}");
    let three = "[worker]\n[[routes]]\npath = \"/a\"\n[[routes]]\npath = \"/b\"\n[[routes]]\npath = \"/c\"\n";
    assert_eq!(refused("wide", three, Some("echo.wasm")).0, 422, "over deploy.caps.routes");
    assert_eq!(refused("Bad.Name", hello, Some("echo.wasm")).0, 400);
    assert_eq!(post(gw.addr, "/hello", b"{\"a\":1}").text(), "{\"a\":1}");
    let modules = std::fs::read_dir(d.join("deployed")).unwrap().count();
    assert_eq!(modules, 2, "hello.toml and its module, nothing left by the refusals");

    // Replaced: another module and another route.
    let moved = "[worker]\n[[routes]]\nprefix = \"/moved\"\n";
    let (status, body) = refused("hello", moved, Some("echo.wasm"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(post(gw.addr, "/hello", b"{}").status, 404);
    assert_eq!(post(gw.addr, "/moved/x", b"[1]").text(), "[1]");

    // A restart serves what was deployed.
    gw.stop();
    let gw = Gateway::start_at(&config, &env);
    assert_eq!(post(gw.addr, "/moved/x", b"[2]").text(), "[2]");
    assert!(listed(&gw).to_string().contains("\"name\":\"hello\""));

    // Removed, with its files.
    assert_eq!(api(&gw, "DELETE", "/workers/hello", Some(TOKEN), &[]).0, 200);
    assert_eq!(post(gw.addr, "/moved/x", b"[3]").status, 404);
    assert_eq!(api(&gw, "DELETE", "/workers/hello", Some(TOKEN), &[]).0, 404);
    assert_eq!(api(&gw, "DELETE", "/workers/echo", Some(TOKEN), &[]).0, 409);
    assert_eq!(std::fs::read_dir(d.join("deployed")).unwrap().count(), 0);
}

/// A deploy changes one worker: the others are carried over as they serve, their module
/// files not looked at (a reload looks at them).
#[test]
fn a_deploy_leaves_the_other_workers_files_to_the_next_reload() {
    let (dir, config) = deploy_site();
    let d = dir.path();
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[workers.file]\nmodule = \"echo.wasm\"\n\n[[routes]]\npath = \"/file\"\nworker = \"file\"\n");
    std::fs::write(&config, text).unwrap();
    std::fs::copy(d.join("echo.wasm"), d.join("hello.wasm")).unwrap();
    let gw = Gateway::start_at(&config, &[("EDGEGATE_ADMIN_TOKEN", TOKEN)]);
    std::fs::copy(d.join("broken.wasm"), d.join("echo.wasm")).unwrap();

    let hello = "[worker]\n[[routes]]\npath = \"/hello\"\n";
    let (status, body) =
        api(&gw, "PUT", "/workers/hello", Some(TOKEN), &form(d, hello, Some("hello.wasm")));
    assert_eq!(status, 200, "the file worker's broken module is not looked at: {body}");
    assert!(body.contains("\"changed\":[\"hello\"]"), "{body}");
    assert_eq!(post(gw.addr, "/hello", b"{\"a\":1}").text(), "{\"a\":1}");
    assert_eq!(post(gw.addr, "/file", b"{\"a\":2}").text(), "{\"a\":2}");

    let (status, body) = api(&gw, "POST", "/reload", Some(TOKEN), &[]);
    assert_eq!(status, 422, "a reload looks: {body}");
    assert!(body.contains("workers.file.module"), "{body}");
    assert_eq!(post(gw.addr, "/file", b"{\"a\":3}").text(), "{\"a\":3}");
}

#[test]
fn without_an_admin_token_nothing_can_be_deployed() {
    let (dir, config) = deploy_site();
    let gw = Gateway::start_at(&config, &[]);
    let hello = "[worker]\n[[routes]]\npath = \"/hello\"\n";
    let (status, body) =
        api(&gw, "PUT", "/workers/hello", None, &form(dir.path(), hello, Some("echo.wasm")));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("EDGEGATE_ADMIN_TOKEN"), "{body}");
    assert_eq!(post(gw.addr, "/hello", b"{}").status, 404);
}

/// `/metrics` grows with the workers that serve, not with the workers configured: a worker's
/// guest histograms appear with its first request, and a reload keeps counting in them.
#[test]
fn only_workers_that_served_have_series() {
    let gw = Gateway::start(&two_workers_one_resident());
    let cpu_count = |worker: &str| {
        crate::support::metric_line(
            &gw,
            &format!("edgegate_guest_cpu_seconds_count{{worker=\"{worker}\"}}"),
        )
    };
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
    assert_eq!(
        cpu_count("hostile").as_deref(),
        Some("edgegate_guest_cpu_seconds_count{worker=\"hostile\"} 1")
    );
    assert_eq!(cpu_count("echo"), None, "echo served nothing");
    let info = crate::support::metric_line(&gw, "edgegate_worker_info{worker=\"echo\"");
    assert!(info.is_some(), "every worker has its one info line");

    let reloaded = crate::support::reload(&gw, None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text());
    assert_eq!(get(gw.addr, "/h/ok").status, 200);
    assert_eq!(
        cpu_count("hostile").as_deref(),
        Some("edgegate_guest_cpu_seconds_count{worker=\"hostile\"} 2")
    );
    assert_eq!(cpu_count("echo"), None);
}

/// A deployed worker's table may name a registry reference instead of uploading a module.
/// A later deploy of another worker carries it over without asking the registry (which is
/// down by then); a reload asks, and is refused.
#[test]
fn the_workers_api_deploys_a_worker_by_registry_reference() {
    let Some(mut registry) =
        edgegate_testkit::registry::Registry::start("api_deploys_by_reference")
    else {
        return;
    };
    let (dir, config) = deploy_site();
    let d = dir.path();
    let reference = format!("oci://{}/team/hello:v1", registry.host());
    crate::registry::publish(d, edgegate_guests::ECHO_JSON, &reference);
    let env = [("EDGEGATE_ADMIN_TOKEN", TOKEN), ("DOCKER_CONFIG", "/nonexistent")];
    let gw = Gateway::start_at(&config, &env);
    let hello = format!("[worker]\nmodule = {reference:?}\n[[routes]]\npath = \"/hello\"\n");
    let (status, body) = api(&gw, "PUT", "/workers/hello", Some(TOKEN), &form(d, &hello, None));
    assert_eq!(status, 422, "a registry [deploy] does not grant: {body}");
    assert!(body.contains("grants.registries"), "{body}");
    // Granted: the registry's `team/` repositories, not the whole registry.
    let mut text = std::fs::read_to_string(&config).unwrap();
    text += &format!("\n[deploy.grants]\nregistries = [\"{}/team/\"]\n", registry.host());
    std::fs::write(&config, text).unwrap();
    assert_eq!(crate::support::reload(&gw, Some(TOKEN)).status, 200);
    let elsewhere = hello.replace("/team/", "/teams/");
    let (status, _) = api(&gw, "PUT", "/workers/hello", Some(TOKEN), &form(d, &elsewhere, None));
    assert_eq!(status, 422, "another repository of the registry");
    let (status, body) = api(&gw, "PUT", "/workers/hello", Some(TOKEN), &form(d, &hello, None));
    assert_eq!(status, 200, "{body}");
    assert_eq!(post(gw.addr, "/hello", b"{\"a\":1}").text(), "{\"a\":1}");
    let workers = listed(&gw);
    let digest = edgegate_runtime::module_digest(edgegate_guests::ECHO_JSON);
    assert!(workers.to_string().contains(&digest), "{workers}");
    // A pulled module is held to the deployer's caps.module, not only the registry's
    // largest, even when it is in the store already: a reload that lowers it under hello's
    // module is refused, and once hello is gone, deploying it again is.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("module = \"64KiB\"", "module = \"1KiB\"")).unwrap();
    assert_eq!(crate::support::reload(&gw, Some(TOKEN)).status, 422, "hello is over it now");
    assert_eq!(api(&gw, "DELETE", "/workers/hello", Some(TOKEN), &[]).0, 200);
    assert_eq!(crate::support::reload(&gw, Some(TOKEN)).status, 200);
    let (status, body) = api(&gw, "PUT", "/workers/hello", Some(TOKEN), &form(d, &hello, None));
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("caps.module"), "{body}");
    std::fs::write(&config, text).unwrap();
    assert_eq!(crate::support::reload(&gw, Some(TOKEN)).status, 200);
    let (status, body) = api(&gw, "PUT", "/workers/hello", Some(TOKEN), &form(d, &hello, None));
    assert_eq!(status, 200, "{body}");

    registry.stop();
    let other = "[worker]\n[[routes]]\npath = \"/other\"\n";
    let (status, body) =
        api(&gw, "PUT", "/workers/other", Some(TOKEN), &form(d, other, Some("echo.wasm")));
    assert_eq!(status, 200, "the registry is not asked for a carried worker: {body}");
    assert_eq!(post(gw.addr, "/hello", b"{\"a\":1}").text(), "{\"a\":1}");
    let reload = crate::support::reload(&gw, Some(TOKEN));
    assert_eq!(reload.status, 422, "{}", reload.text());
    assert!(reload.text().contains("hello"), "{}", reload.text());
}
