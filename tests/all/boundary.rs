//! What a deploy through the admin API can reach, each way it once reached past its own
//! worker (issue 50's table), through the real binary: native code, a path in a table, traffic
//! another owner routes, capabilities and limits nobody granted.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Gateway, Reply, admin_api, deploy_form, http, post, runtime_section};

/// The admin token of these sites: long enough to be a secret.
const ADMIN: &str = "boundary-admin-token-0123456789abcdef";
/// Tenants' tokens.
const TENANT_T: &str = "tenant-t-token-0123456789abcdef0123456789";

/// A site whose admin API deploys into `deployed/` within `deploy` (its `[deploy]` keys),
/// with `rest` after it; echo-json's module beside it as `echo.wasm`.
fn site(deploy: &str, rest: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edgegate.toml");
    let text = format!(
        "{runtime}\n[deploy]\ndir = \"deployed\"\n{deploy}\n\n{rest}\n",
        runtime = runtime_section()
    );
    std::fs::write(&config, text).unwrap();
    std::fs::write(dir.path().join("echo.wasm"), edgegate_guests::ECHO_JSON).unwrap();
    (dir, config)
}

fn edgegate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_edgegate")).args(args).output().unwrap()
}

/// `edgegate compile` of `wasm` with `config`'s engine settings, beside it.
fn compiled(config: &Path, wasm: &Path) -> PathBuf {
    let out = wasm.with_extension("cwasm");
    let args = ["compile", wasm.to_str().unwrap(), "-o", out.to_str().unwrap()];
    let done = edgegate(&[&args[..], &["--config", config.to_str().unwrap()]].concat());
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    out
}

/// Row 1: the output of `edgegate compile` is native code. The configuration file may name
/// it (the operator's own), and it serves; uploaded through the API it is refused before it
/// is written, as is anything else that is not binary Wasm.
#[test]
fn the_api_takes_only_wasm_never_native_code() {
    let hello = "[worker]\n[[routes]]\npath = \"/hello\"\n";
    let (dir, config) = site("", "");
    let d = dir.path();
    compiled(&config, &d.join("echo.wasm"));
    let file_worker = "[workers.native]\nmodule = \"echo.cwasm\"\n[[routes]]\npath = \"/native\"\nworker = \"native\"\n";
    let text = std::fs::read_to_string(&config).unwrap() + file_worker;
    std::fs::write(&config, text).unwrap();
    let gw = Gateway::start_at(&config, &[("EDGEGATE_ADMIN_TOKEN", ADMIN)]);
    assert_eq!(post(gw.addr, "/native", b"[1,2]").text(), "[1,2]", "the file's .cwasm serves");

    let put = |module: &str| {
        admin_api(&gw, "PUT", "/workers/hello", Some(ADMIN), &deploy_form(d, hello, Some(module)))
    };
    let (status, body) = put("echo.cwasm");
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("\"not_wasm\"") && body.contains("native code"), "{body}");
    std::fs::write(d.join("text.wat"), "(module (memory (export \"memory\") 1))").unwrap();
    let (status, body) = put("text.wat");
    assert_eq!((status, body.contains("not_wasm")), (422, true), "{body}");
    assert_eq!(post(gw.addr, "/hello", b"[1,2]").status, 404, "nothing was deployed");
    assert!(
        !d.join("deployed").exists() || std::fs::read_dir(d.join("deployed")).unwrap().count() == 0
    );
    let (status, body) = put("echo.wasm");
    assert_eq!(status, 200, "{body}");
    assert_eq!(post(gw.addr, "/hello", b"[1,2]").text(), "[1,2]");
}

/// `method path` on the gateway with `Host: host`.
fn to_host(gw: &Gateway, host: &str, method: &str, path: &str, body: &[u8]) -> Reply {
    http(gw.addr, method, path, &[("host", host)], body)
}

/// Row 2: a table names its code by upload, `builtin:` or `oci://`, never by a path. The API
/// refuses a table that names one; a table put in the directory by hand that names one is
/// refused at start, naming the file and the key; nothing outside the directory is removed.
#[test]
fn a_deployed_table_names_its_code_never_a_path() {
    let (dir, config) = site("", "");
    let d = dir.path();
    std::fs::write(d.join("victim.wasm"), edgegate_guests::ECHO_JSON).unwrap();
    let gw = Gateway::start_at(&config, &[("EDGEGATE_ADMIN_TOKEN", ADMIN)]);
    let victim = d.join("victim.wasm").display().to_string();
    for module in ["../victim.wasm", victim.as_str()] {
        let table = format!("[worker]\nmodule = {module:?}\n[[routes]]\npath = \"/v\"\n");
        let (status, body) =
            admin_api(&gw, "PUT", "/workers/v", Some(ADMIN), &deploy_form(d, &table, None));
        assert_eq!(status, 400, "{module}: {body}");
        assert!(body.contains("never a path"), "{body}");
    }
    assert_eq!(admin_api(&gw, "DELETE", "/workers/v", Some(ADMIN), &[]).0, 404);
    drop(gw);

    // Put there by hand: `serve` and `check` refuse it, and say where.
    let deployed = d.join("deployed");
    std::fs::create_dir_all(&deployed).unwrap();
    std::fs::write(deployed.join("v.toml"), "[worker]\nmodule = \"../victim.wasm\"\n").unwrap();
    let checked = edgegate(&["check", "--config", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&checked.stderr).to_string();
    assert!(!checked.status.success(), "{stderr}");
    assert!(
        stderr.contains("v.toml: worker.module") && stderr.contains("never a path"),
        "{stderr}"
    );
    let served = Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(["serve", "--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(["--admin", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&served.stderr).to_string();
    assert_eq!(served.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("v.toml: worker.module"), "{stderr}");
    // A link named as the API names uploads, pointing out of the directory: refused too.
    let link = deployed.join("v-0123456789abcdef.wasm");
    std::os::unix::fs::symlink(d.join("victim.wasm"), &link).unwrap();
    std::fs::write(deployed.join("v.toml"), "[worker]\nmodule = \"v-0123456789abcdef.wasm\"\n")
        .unwrap();
    let checked = edgegate(&["check", "--config", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&checked.stderr).to_string();
    assert!(stderr.contains("not a regular file"), "{stderr}");
    assert!(d.join("victim.wasm").exists(), "nothing outside the directory was touched");
}

/// Row 3: a deployed route that would take traffic the file routes (a longer path under the
/// file's prefix, skipping its identity; a host with no table beside the file's catch-all) is
/// refused, and the file's routes keep serving it.
#[test]
fn a_deployed_route_takes_no_traffic_from_the_file() {
    let file = r#"
        [[routes]]
        prefix = "/api/"
        respond = { status = 200, body = "file api" }

        [[routes]]
        prefix = "/"
        respond = { status = 200, body = "file catch-all" }
    "#;
    let (dir, config) = site("", file);
    let d = dir.path();
    let gw = Gateway::start_at(&config, &[("EDGEGATE_ADMIN_TOKEN", ADMIN)]);
    let put = |table: &str| {
        admin_api(&gw, "PUT", "/workers/t", Some(ADMIN), &deploy_form(d, table, Some("echo.wasm")))
    };
    let (status, body) = put("[worker]\n[[routes]]\npath = \"/api/login\"\n");
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("would take requests that the configuration file serves"), "{body}");
    let (status, body) = put("[worker]\n[[routes]]\nhost = \"victim.example\"\npath = \"/x\"\n");
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("a table for victim.example would take"), "{body}");
    assert_eq!(post(gw.addr, "/api/login", b"{}").text(), "file api");
    assert_eq!(to_host(&gw, "victim.example", "POST", "/x", b"{}").text(), "file catch-all");
}

/// Row 4: what `[deploy]` does not grant, a deploy cannot grant itself: a fetch to the admin
/// listener, an upstream, a KV namespace, a JWT secret from the environment or a file, more
/// CPU or deadline than its caps.
#[test]
fn a_deploy_grants_itself_nothing() {
    let rest = "[upstreams.origin]\nurl = \"http://127.0.0.1:9\"\n[kv.shared]\n";
    let (dir, config) = site("", rest);
    let d = dir.path();
    let gw = Gateway::start_at(&config, &[("EDGEGATE_ADMIN_TOKEN", ADMIN)]);
    let admin = format!("http://{}", gw.admin);
    let cases = [
        (format!("fetch = [{admin:?}]"), "worker.fetch[0]"),
        ("upstreams = [\"origin\"]".to_owned(), "worker.upstreams[0]"),
        ("kv = [\"shared\"]".to_owned(), "worker.kv[0]"),
        (
            "jwt = { keys = [{ alg = \"HS256\", secret_env = \"EDGEGATE_ADMIN_TOKEN\" }] }"
                .to_owned(),
            "worker.jwt.keys[0].secret_env",
        ),
        (
            "jwt = { keys = [{ alg = \"RS256\", pem_file = \"/etc/passwd\" }] }".to_owned(),
            "worker.jwt.keys[0].pem_file",
        ),
        ("limits = { cpu = \"10s\" }".to_owned(), "worker.limits.cpu"),
        ("limits = { deadline = \"1h\" }".to_owned(), "worker.limits.deadline"),
        ("image = true".to_owned(), "worker.image"),
    ];
    for (lines, key) in cases {
        let table = format!("[worker]\n{lines}\n[[routes]]\npath = \"/t\"\n");
        let (status, body) = admin_api(
            &gw,
            "PUT",
            "/workers/t",
            Some(ADMIN),
            &deploy_form(d, &table, Some("echo.wasm")),
        );
        assert_eq!(status, 422, "{lines}: {body}");
        assert!(body.contains(key) && body.contains("(deploy)"), "{lines}: {body}");
    }
    assert_eq!(post(gw.addr, "/t", b"{}").status, 404, "nothing was deployed");
}

/// Row 4, at run time: an origin granted by a wildcard reaches public addresses only, so a
/// name or an address that leads back to this host (the admin listener) is refused before
/// any byte is sent; an address the operator grants by name is reached.
#[test]
fn a_wildcard_fetch_grant_cannot_reach_this_host() {
    let origin = crate::support::serve_http(|_, _| {
        b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\norigin".to_vec()
    });
    let named = format!("http://127.0.0.1:{}", origin.port());
    // The admin listener's port, known before it starts, so that a wildcard can name it.
    let admin_port =
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let any_on_admin_port = format!("http://*:{admin_port}");
    let tenant = format!(
        "[tenants.t]\ntoken_env = \"T_TOKEN\"\nhosts = [\"t.example\"]\n\
         grants = {{ fetch = [\"http://*\", {any_on_admin_port:?}, {named:?}] }}\n"
    );
    let (dir, config) = site("", &tenant);
    let d = dir.path();
    let env = [("EDGEGATE_ADMIN_TOKEN", ADMIN), ("T_TOKEN", TENANT_T)];
    let admin = format!("127.0.0.1:{admin_port}");
    let gw = Gateway::start_at_with(&config, &["--admin", &admin], &env);
    let table = format!(
        "[worker]\nfetch = [\"http://*\", {any_on_admin_port:?}, {named:?}]\n\
         [[routes]]\nhost = \"t.example\"\nprefix = \"/h\"\n"
    );
    let hostile = d.join("hostile.wasm");
    std::fs::copy(edgegate_guests::HOSTILE, &hostile).unwrap();
    let (status, body) = admin_api(
        &gw,
        "PUT",
        "/workers/h",
        Some(TENANT_T),
        &deploy_form(d, &table, Some("hostile.wasm")),
    );
    assert_eq!(status, 200, "{body}");
    let fetch = |url: &str| to_host(&gw, "t.example", "GET", &format!("/h/fetch?url={url}"), b"");
    for url in [
        format!("http://127.0.0.1:{admin_port}/healthz"),
        format!("http://localhost:{admin_port}/healthz"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ] {
        let reply = fetch(&url);
        assert_eq!((reply.status, reply.text().as_str()), (500, "NotGranted"), "{url}");
    }
    let reply = fetch(&format!("{named}/"));
    assert_eq!((reply.status, reply.text().as_str()), (200, "200 origin\n"), "granted by name");
}

/// `serve` refuses an admin token that is the documented placeholder or too short to be a
/// secret, and a tenant token likewise.
#[test]
fn a_placeholder_or_short_token_is_refused_at_start() {
    let (_dir, config) = site("", "");
    for (token, why) in
        [("replace-with-a-long-random-token", "placeholder"), ("s3cret", "too short")]
    {
        let out = Command::new(env!("CARGO_BIN_EXE_edgegate"))
            .args(["serve", "--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .args(["--admin", "127.0.0.1:0"])
            .env("EDGEGATE_ADMIN_TOKEN", token)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{token}: {stderr}");
        assert!(stderr.contains("EDGEGATE_ADMIN_TOKEN") && stderr.contains(why), "{stderr}");
    }
}

const TENANT_A: &str = "tenant-a-token-0123456789abcdef0123456789";
const TENANT_B: &str = "tenant-b-token-0123456789abcdef0123456789";

/// Two tenants with their own KV namespaces and upstreams, `a` on `a.example`, `b` on every
/// name below `b.example`.
const TWO_TENANTS: &str = r#"
[kv.a]
[kv.b]

[upstreams.a-api]
url = "http://127.0.0.1:9"

[upstreams.b-api]
url = "http://127.0.0.1:9"

[tenants.a]
token_env = "A_TOKEN"
hosts = ["a.example"]
grants = { kv = ["a"], upstreams = ["a-api"] }

[tenants.b]
token_env = "B_TOKEN"
hosts = ["*.b.example"]
grants = { kv = ["b"], upstreams = ["b-api"] }
"#;

/// The [`TWO_TENANTS`] site serving, logging in JSON, with `module` beside it as `file`.
fn two_tenants(module: &str, file: &str) -> (tempfile::TempDir, Gateway) {
    let (dir, config) = site("", TWO_TENANTS);
    std::fs::copy(module, dir.path().join(file)).unwrap();
    let env = [
        ("EDGEGATE_ADMIN_TOKEN", ADMIN),
        ("A_TOKEN", TENANT_A),
        ("B_TOKEN", TENANT_B),
        ("EDGEGATE_LOG_FORMAT", "json"),
    ];
    let gw = Gateway::start_at(&config, &env);
    (dir, gw)
}

/// `GET /tenants/NAME/usage` with `token`: the counters.
fn usage(gw: &Gateway, tenant: &str, token: &str) -> serde_json::Value {
    let (status, body) =
        admin_api(gw, "GET", &format!("/tenants/{tenant}/usage"), Some(token), &[]);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The JSON lines of `stderr` whose target is `target`.
fn lines(stderr: &str, target: &str) -> Vec<serde_json::Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["target"] == target)
        .collect()
}

/// Two tenants with their own tokens deploy, list and delete only their own workers, both
/// named `api`; one's worker cannot be granted, nor reach, the other's KV namespace or
/// upstream, nor take its host; each one's usage counters match what was sent to it, and
/// each change has its audit line.
#[test]
fn two_tenants_see_change_and_use_only_their_own() {
    let (dir, mut gw) = two_tenants(edgegate_guests::HOSTILE, "hostile.wasm");
    let d = dir.path();
    let put = |token: &str, path: &str, table: &str| {
        admin_api(&gw, "PUT", path, Some(token), &deploy_form(d, table, Some("hostile.wasm")))
    };
    let worker = |host: &str, lines: &str| {
        format!(
            "[worker]\n{lines}\nlimits = {{ cpu = \"20ms\" }}\n[[routes]]\nhost = \"{host}\"\nprefix = \"/h\"\n"
        )
    };
    let (status, body) = put(TENANT_A, "/workers/api", &worker("a.example", "kv = [\"a\"]"));
    assert_eq!(status, 200, "{body}");
    let (status, body) = put(TENANT_B, "/workers/api", &worker("api.b.example", "kv = [\"b\"]"));
    assert_eq!(status, 200, "{body}");
    // Another's namespace, upstream or host: refused, naming the key.
    for (table, key) in [
        (worker("a.example", "kv = [\"b\"]"), "worker.kv[0]"),
        (worker("a.example", "upstreams = [\"b-api\"]"), "worker.upstreams[0]"),
        (worker("x.b.example", ""), "routes[0]"),
    ] {
        let (status, body) = put(TENANT_A, "/workers/other", &table);
        assert_eq!(status, 422, "{body}");
        assert!(body.contains(key) && body.contains("tenant"), "{body}");
    }

    // Each lists its own, under its own name; the admin token lists both, with their tenant.
    for (token, tenant) in [(TENANT_A, "a"), (TENANT_B, "b")] {
        let (_, body) = admin_api(&gw, "GET", "/workers", Some(token), &[]);
        let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
        let workers = listed["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 1, "{body}");
        assert_eq!(
            (workers[0]["name"].as_str(), workers[0]["tenant"].as_str()),
            (Some("api"), Some(tenant))
        );
        assert!(workers[0]["deployed_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{body}");
    }
    let (_, body) = admin_api(&gw, "GET", "/workers", Some(ADMIN), &[]);
    assert!(body.contains("\"a/api\"") && body.contains("\"b/api\""), "{body}");
    // Nor change the other's.
    assert_eq!(admin_api(&gw, "DELETE", "/workers/b/api", Some(TENANT_A), &[]).0, 404);
    assert_eq!(put(TENANT_A, "/workers/b/api", &worker("a.example", "")).0, 404);
    assert_eq!(admin_api(&gw, "GET", "/tenants/b/usage", Some(TENANT_A), &[]).0, 404);
    assert_eq!(crate::support::reload(&gw, Some(TENANT_A)).status, 401);
    let metrics = |token: &str| {
        let auth = format!("Bearer {token}");
        http(gw.admin, "GET", "/metrics", &[("authorization", &auth)], b"")
    };
    assert_eq!(metrics(TENANT_A).status, 401, "/metrics names every tenant");

    // At run time: each host reaches its tenant's worker only, and a worker only its own
    // namespace.
    let kv = |host: &str, query: &str| to_host(&gw, host, "POST", &format!("/h/kv?{query}"), b"");
    assert_eq!(kv("a.example", "op=put&ns=a&key=k&n=3").text(), "stored");
    assert_eq!(kv("a.example", "op=get&ns=b&key=k").text(), "NotGranted");
    assert_eq!(kv("api.b.example", "op=get&ns=a&key=k").text(), "NotGranted");
    assert_eq!(kv("api.b.example", "op=get&ns=b&key=k").text(), "(none)");
    assert_eq!(to_host(&gw, "other.b.example", "GET", "/h/ok", b"").status, 404);
    assert_eq!(to_host(&gw, "localhost", "GET", "/h/ok", b"").status, 404);

    // Usage: what was sent, counted exactly; CPU as the access lines add it up, within 1 %.
    let before = [usage(&gw, "a", ADMIN), usage(&gw, "b", TENANT_B)];
    let (mut sent, mut received) = ([0u64; 2], [0u64; 2]);
    // Each some CPU (a few ms per request dwarfs the microsecond an access line rounds off),
    // and `a` a KV read every other request.
    for i in 0..40 {
        let body = vec![b'x'; 100 + i];
        let (t, reply) = match i % 4 {
            0 => (0, to_host(&gw, "a.example", "POST", "/h/kv?op=get&ns=a&key=k", &body)),
            2 => (0, to_host(&gw, "a.example", "POST", "/h/spin?ms=2", &body)),
            _ => (1, to_host(&gw, "api.b.example", "POST", "/h/spin?ms=2", &body)),
        };
        assert_eq!(reply.status, 200, "{}", reply.text());
        sent[t] += body.len() as u64;
        received[t] += reply.body.len() as u64;
    }
    let after = [usage(&gw, "a", ADMIN), usage(&gw, "b", TENANT_B)];
    for t in 0..2 {
        let delta = |key: &str| after[t][key].as_u64().unwrap() - before[t][key].as_u64().unwrap();
        assert_eq!(delta("requests"), 20, "{}", after[t]);
        assert_eq!(delta("request_bytes"), sent[t], "{}", after[t]);
        assert_eq!(delta("response_bytes"), received[t], "{}", after[t]);
        assert_eq!(delta("fetches"), 0);
    }
    let kv_ops = |usage: &serde_json::Value| usage["kv_operations"].as_u64().unwrap();
    assert_eq!(kv_ops(&after[0]) - kv_ops(&before[0]), 10, "one per KV read");
    let text = metrics(ADMIN).text();
    let requests =
        format!("edgegate_tenant_requests_total{{tenant=\"a\"}} {}", after[0]["requests"]);
    assert!(text.contains(&requests), "{requests} in\n{text}");
    let cpu =
        [after[0]["cpu_seconds"].as_f64().unwrap(), after[1]["cpu_seconds"].as_f64().unwrap()];

    let (_, stderr) = gw.stop();
    for (t, tenant) in ["a", "b"].iter().enumerate() {
        let logged: u64 = lines(&stderr, "edgegate::access")
            .iter()
            .filter(|l| l["tenant"] == *tenant)
            .map(|l| l["cpu_us"].as_u64().unwrap())
            .sum();
        let logged = logged as f64 / 1e6;
        assert!(
            cpu[t] > 0.0 && (cpu[t] - logged).abs() <= cpu[t] * 0.01,
            "{tenant}: {} vs {logged}",
            cpu[t]
        );
    }
    let audit = lines(&stderr, "edgegate::audit");
    let digest = edgegate_runtime::module_digest(&std::fs::read(edgegate_guests::HOSTILE).unwrap());
    let deployed = audit.iter().find(|l| l["by"] == "tenant:a" && l["result"] == "ok");
    let deployed = deployed.unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!(
        (deployed["action"].as_str(), deployed["worker"].as_str()),
        (Some("deploy"), Some("a/api"))
    );
    assert_eq!(deployed["digest"].as_str(), Some(digest.as_str()));
    assert!(deployed["from"].as_str().is_some_and(|f| f.starts_with("127.0.0.1:")), "{deployed}");
    assert!(deployed["timestamp"].is_string());
    assert!(audit.iter().any(|l| l["by"] == "tenant:a" && l["result"] == "refused"), "{audit:?}");
}

/// A component's answer streamed past its buffer: the access line and the tenant's counters
/// get what its guest spent streaming and the bytes sent; one cut at its `response_body`
/// limit says so in the line (`cut`) and in `edgegate_responses_cut_total`, not as a clean
/// 200.
#[test]
fn a_streamed_answer_is_charged_and_a_cut_one_says_why() {
    let (dir, mut gw) = two_tenants(edgegate_guests::HTTP_COMPONENT, "component.wasm");
    let d = dir.path();
    let table = "[worker]\nlimits = { response_body = \"512KiB\", cpu = \"50ms\", hostcalls = 10000 }\n\
                 [[routes]]\nhost = \"a.example\"\nprefix = \"/big\"\n";
    let form = deploy_form(d, table, Some("component.wasm"));
    let (status, body) = admin_api(&gw, "PUT", "/workers/c", Some(TENANT_A), &form);
    assert_eq!(status, 200, "{body}");
    let curl = |path: &str| {
        Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}"])
            .args(["-H", "host: a.example"])
            .arg(format!("http://{}{path}", gw.addr))
            .output()
            .unwrap()
    };
    let whole = curl("/big/256");
    let said = String::from_utf8_lossy(&whole.stdout).to_string();
    assert!(whole.status.success() && said == format!("200 {}", 256 << 10), "{said}");
    // Over the limit after the head went: the client sees a transfer cut short.
    let cut = curl("/big/1024");
    assert!(!cut.status.success(), "a cut answer is not a whole one");
    let usage = usage(&gw, "a", ADMIN);
    let text = {
        let auth = format!("Bearer {ADMIN}");
        http(gw.admin, "GET", "/metrics", &[("authorization", &auth)], b"").text()
    };
    assert!(
        text.contains("edgegate_responses_cut_total{route=\"a/c[0]\",worker=\"a/c\",reason=\"response_too_large\"} 1"),
        "{text}"
    );
    let (_, stderr) = gw.stop();
    let access = lines(&stderr, "edgegate::access");
    let line = |path: &str| access.iter().find(|l| l["path"] == path).cloned().unwrap();
    let whole = line("/big/256");
    assert_eq!((whole["status"].as_u64(), whole["cut"].as_str()), (Some(200), Some("-")));
    assert_eq!(whole["bytes_out"].as_u64(), Some(256 << 10));
    assert!(
        whole["cpu_us"].as_u64().unwrap() > 0 && whole["memory_peak"].as_u64().unwrap() > 0,
        "{whole}"
    );
    let cut = line("/big/1024");
    assert_eq!(
        (cut["status"].as_u64(), cut["cut"].as_str()),
        (Some(200), Some("response_too_large"))
    );
    assert_eq!(cut["level"], "WARN", "{cut}");
    assert!(cut["cpu_us"].as_u64().unwrap() > 0, "the cut guest's CPU is charged: {cut}");
    let sent = whole["bytes_out"].as_u64().unwrap() + cut["bytes_out"].as_u64().unwrap();
    assert_eq!(usage["response_bytes"].as_u64(), Some(sent), "{usage}");
    assert_eq!(usage["requests"].as_u64(), Some(2), "{usage}");
}

/// A tenant's workers share its `caps.concurrency` places, all together: past them a request
/// waits `queue_timeout`, then gets 503, while the configuration file's workers still serve.
#[test]
fn a_tenant_s_workers_share_its_slots() {
    let tenant = "[tenants.a]\ntoken_env = \"A_TOKEN\"\nhosts = [\"a.example\"]\ncaps = { concurrency = 1, cpu = \"1s\" }\n\
                  [workers.file]\nmodule = \"builtin:echo-json\"\n[[routes]]\npath = \"/file\"\nworker = \"file\"\n";
    let (dir, config) = site("", &format!("[server]\nqueue_timeout = \"50ms\"\n{tenant}"));
    let d = dir.path();
    std::fs::copy(edgegate_guests::HOSTILE, d.join("hostile.wasm")).unwrap();
    let gw = Gateway::start_at(&config, &[("EDGEGATE_ADMIN_TOKEN", ADMIN), ("A_TOKEN", TENANT_A)]);
    let table = |name: &str| {
        format!(
            "[worker]\nlimits = {{ cpu = \"500ms\", deadline = \"30s\", hostcalls = 10000 }}\n[[routes]]\nhost = \"a.example\"\nprefix = \"/{name}\"\n"
        )
    };
    for name in ["one", "two"] {
        let form = deploy_form(d, &table(name), Some("hostile.wasm"));
        let (status, body) =
            admin_api(&gw, "PUT", &format!("/workers/{name}"), Some(TENANT_A), &form);
        assert_eq!(status, 200, "{body}");
    }
    // Worker one holds the tenant's one place (requests that spin for 200 ms of CPU, longer
    // than the queue timeout); worker two, another worker of the same tenant, waits for it.
    let addr = gw.addr;
    let (statuses, file) = std::thread::scope(|s| {
        let busy = s.spawn(move || {
            let spin = || http(addr, "GET", "/one/spin?ms=200", &[("host", "a.example")], b"");
            (0..5).map(|_| spin()).map(|r| (r.status, r.text())).collect::<Vec<_>>()
        });
        let mut refused = 0;
        while !busy.is_finished() {
            let reply = to_host(&gw, "a.example", "GET", "/two/ok", b"");
            assert!(matches!(reply.status, 200 | 503), "{}", reply.text());
            refused += usize::from(reply.status == 503);
        }
        let file = post(gw.addr, "/file", b"[1]").status;
        (busy.join().unwrap(), (refused, file))
    });
    assert!(statuses.iter().all(|(s, _)| *s == 200), "{statuses:?}");
    let (refused, file) = file;
    assert!(refused > 0, "the second worker waited for the tenant's one place, and was refused");
    assert_eq!(file, 200);
}
