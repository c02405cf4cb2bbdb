//! The worker toolchain end to end: `edgegate new`, `build` (wasm-opt, the report, the
//! budget), `compile`, and `check`'s report, with the real binary, cargo and wasm-opt; and a
//! new user's first steps, from the folder above the crate and from outside this checkout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::cli::{check, edgegate};
use crate::support::{Gateway, get, post, runtime_section};

/// The wasm-opt `tools/install` puts in this checkout, if it ran.
fn wasm_opt() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/node_modules/.bin/wasm-opt");
    if path.is_file() {
        return Some(path);
    }
    let why = "tools/node_modules is missing: run tools/install (needs npm)";
    assert!(std::env::var("EDGEGATE_REQUIRE_COMPARATORS").as_deref() != Ok("1"), "{why}");
    eprintln!("!!! wasm-opt not installed ({why}): scaffolds are built unoptimized");
    None
}

/// `edgegate` run in `cwd` with the test's per-user cache (where `edgegate tools install`
/// puts wasm-opt), with PATH and the environment otherwise as they are.
fn edgegate_in(cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_edgegate"));
    command
        .current_dir(cwd)
        .args(args)
        .env_remove("EDGEGATE_WASM_OPT")
        .env("XDG_CACHE_HOME", crate::support::cache_dir().join("xdg"));
    command
}

/// `edgegate build` of `krate` into the shared test target directory, with this checkout's
/// wasm-opt.
fn build(krate: &Path, args: &[&str]) -> Output {
    let mut command = edgegate_in(krate.parent().unwrap(), &["build", krate.to_str().unwrap()]);
    command.args(args).env("CARGO_TARGET_DIR", scaffolds_target());
    match wasm_opt() {
        Some(path) => command.env("EDGEGATE_WASM_OPT", path),
        None => command.arg("--no-install"),
    };
    command.output().unwrap()
}

fn scaffolds_target() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffolds")
}

/// PATH without any directory that has a wasm-opt, so `edgegate build` must find or install
/// its own.
fn path_without_wasm_opt() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> =
        std::env::split_paths(&path).filter(|d| !d.join("wasm-opt").exists()).collect();
    std::env::join_paths(kept).unwrap()
}

/// The line of a build report that starts with `field:`.
fn report_line<'a>(stdout: &'a str, field: &str) -> &'a str {
    let prefix = format!("  {field}:");
    stdout.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{stdout}"))
}

/// Serves `module` on `/` and checks the echo template's answers, as crate `name`.
fn serves_as_echo(module: &Path, name: &str) {
    let config = format!(
        "{}\n[workers.w]\nmodule = {:?}\n[[routes]]\nprefix = \"/\"\nworker = \"w\"\n",
        runtime_section(),
        module.display().to_string()
    );
    let gateway = Gateway::start(&config);
    let hello = get(gateway.addr, "/");
    assert_eq!((hello.status, hello.text()), (200, format!("hello from {name}\n")));
    let echoed = post(gateway.addr, "/", b"ping");
    assert_eq!((echoed.status, echoed.text()), (200, "ping".to_string()));
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A scaffold from `template`, built; returns its directory (kept by `dir`) and its module.
fn scaffold(dir: &Path, template: &str) -> PathBuf {
    let krate = dir.join(format!("my-{template}"));
    let out = edgegate(&["new", krate.to_str().unwrap(), "--template", template]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for file in ["Cargo.toml", "src/lib.rs", "README.md", "edgegate.toml"] {
        assert!(krate.join(file).is_file(), "{file} missing");
    }
    let module = krate.join("module.wasm");
    let out = build(&krate, &["-o", module.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let abi = match template {
        "http-component" => "ABI:       wasi:http/proxy component",
        _ => "ABI:       v1",
    };
    assert!(stdout.contains(abi), "{stdout}");
    assert!(stdout.contains("all provided by this host"), "{stdout}");
    match wasm_opt() {
        Some(_) => assert!(stdout.contains("within"), "the template fits its budget: {stdout}"),
        None => assert!(stdout.contains("not checked"), "{stdout}"),
    }
    module
}

#[test]
fn a_scaffold_builds_serves_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let module = scaffold(dir.path(), "echo");
    serves_as_echo(&module, "my-echo");
}

/// `--template http-component`: a standard wasi:http component, built from
/// wasm32-unknown-unknown and wrapped by `edgegate build`, that edgegate serves as any
/// other worker.
#[test]
fn a_component_scaffold_builds_into_a_component_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let module = scaffold(dir.path(), "http-component");
    let bytes = std::fs::read(&module).unwrap();
    assert!(wasmparser::Parser::is_component(&bytes), "not a component");
    serves_as_echo(&module, "my-http-component");

    // Its own configuration: KV through wasi:keyvalue, config through wasi:config, and /me
    // behind a route identity keyed by the crate's jwt-secret.
    let krate = module.parent().unwrap();
    let config = std::fs::read_to_string(krate.join("edgegate.toml")).unwrap();
    let built = "target/wasm32-unknown-unknown/release/my_http_component.opt.wasm";
    assert!(config.contains(built), "{config}");
    let config = config.replace(built, module.to_str().unwrap()).replace(
        "secret_file = \"jwt-secret\"",
        &format!("secret_file = {:?}", krate.join("jwt-secret").to_str().unwrap()),
    );
    let gateway = Gateway::start(&format!("{}\n{config}", runtime_section()));
    assert_eq!(get(gateway.addr, "/").text(), "hello from my-http-component\n");
    let put = crate::support::http(gateway.addr, "PUT", "/kv/a", &[], b"kept");
    assert_eq!(put.status, 204, "{}", put.text());
    assert_eq!(get(gateway.addr, "/kv/a").text(), "kept");
    assert_eq!(post(gateway.addr, "/visits", b"").text(), "1\n");
    assert_eq!(post(gateway.addr, "/visits", b"").text(), "2\n");
    assert_eq!(get(gateway.addr, "/me").status, 401);
    let secret = std::fs::read_to_string(krate.join("jwt-secret")).unwrap();
    let signer = edgegate_testkit::Signer::hmac(
        edgegate_runtime::keys::Alg::Hs256,
        secret.trim_end().as_bytes(),
    );
    let claims =
        serde_json::json!({"sub": "ada", "iss": "me", "exp": edgegate_testkit::now() + 60});
    let bearer = format!("Bearer {}", signer.token(Some("k1"), &claims));
    let me = crate::support::http(
        gateway.addr,
        "GET",
        "/me",
        &[("authorization", &bearer), ("x-jwt-sub", "root")],
        b"",
    );
    assert_eq!((me.status, me.text().as_str()), (200, "hello, ada\n"));
}

/// The first steps of docs/toolchain.md, `edgegate new hello && edgegate build hello`, in a
/// folder outside this checkout (whose own `.cargo/config.toml` would hide the bug): the
/// crate's `.cargo/config.toml` applies (a 64 KiB stack: 2 pages, not 17), and the first
/// build succeeds within the template's budget.
#[test]
fn new_then_build_from_the_parent_folder_gets_the_small_stack() {
    let parent = tempfile::tempdir().unwrap();
    assert!(!parent.path().starts_with(env!("CARGO_MANIFEST_DIR")));
    let new = edgegate_in(parent.path(), &["new", "hello"]).output().unwrap();
    assert!(new.status.success(), "{}", text(&new.stderr));
    let mut command = edgegate_in(parent.path(), &["build", "hello"]);
    // Relative, as CI passes it: it means the folder `build` was started in, not the crate's.
    let up = "../".repeat(parent.path().components().count() - 1);
    let shared = scaffolds_target();
    command.env("CARGO_TARGET_DIR", Path::new(&up).join(shared.strip_prefix("/").unwrap()));
    if let Some(path) = wasm_opt() {
        command.env("EDGEGATE_WASM_OPT", path);
    }
    let out = command.output().unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    assert!(report_line(&stdout, "memory").contains(" 2 pages initial"), "{stdout}");
    if wasm_opt().is_some() {
        assert!(report_line(&stdout, "budget").contains("within"), "{stdout}");
    }
    let module = scaffolds_target().join("wasm32-unknown-unknown/release/hello.opt.wasm");
    let reported = stdout.lines().find_map(|l| l.strip_prefix("hello: ")).unwrap_or("");
    assert_eq!(Path::new(reported).canonicalize().ok(), module.canonicalize().ok(), "{stdout}");
    serves_as_echo(&module, "hello");
}

/// The same run from yet another folder, naming the crate by its full path, with no wasm-opt
/// on PATH or in any node_modules above: the first build installs one for the user (npm),
/// optimizes, fits the budget, and the scaffold's own edgegate.toml serves it.
#[test]
fn new_then_build_outside_the_checkout_installs_wasm_opt_and_fits_the_budget() {
    let outside = tempfile::tempdir().unwrap();
    assert!(!outside.path().starts_with(env!("CARGO_MANIFEST_DIR")));
    let new = edgegate_in(outside.path(), &["new", "hello"]).output().unwrap();
    assert!(new.status.success(), "{}", text(&new.stderr));
    let krate = outside.path().join("hello");
    let elsewhere = tempfile::tempdir().unwrap();
    let out = edgegate_in(elsewhere.path(), &["build", krate.to_str().unwrap()])
        .env("PATH", path_without_wasm_opt())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let tools = crate::support::cache_dir().join("xdg/edgegate/tools");
    let optimized = report_line(&stdout, "optimized");
    assert!(optimized.contains(&tools.display().to_string()), "{stdout}\n{stderr}");
    assert!(report_line(&stdout, "budget").contains("within"), "{stdout}");
    assert!(report_line(&stdout, "memory").contains(" 2 pages initial"), "{stdout}");
    // The scaffold's configuration, verbatim, loads the module where the build put it.
    let config = krate.join("edgegate.toml");
    let check = edgegate_in(outside.path(), &["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check.stderr));
    assert!(text(&check.stdout).contains("worker hello:"), "{}", text(&check.stdout));
    serves_as_echo(&krate.join("target/wasm32-unknown-unknown/release/hello.opt.wasm"), "hello");
}

/// Without wasm-opt and without npm, the first build still succeeds: unoptimized, said
/// loudly, its budget not checked; the module serves.
#[test]
fn without_wasm_opt_or_npm_the_first_build_succeeds_unoptimized() {
    let outside = tempfile::tempdir().unwrap();
    let new = edgegate_in(outside.path(), &["new", "bare"]).output().unwrap();
    assert!(new.status.success(), "{}", text(&new.stderr));
    let tools = tempfile::tempdir().unwrap();
    let out = edgegate_in(outside.path(), &["build", "bare"])
        .env("PATH", path_without_wasm_opt())
        .env("EDGEGATE_TOOLS_DIR", tools.path())
        .env("EDGEGATE_NPM", "/nonexistent/npm")
        .env("CARGO_TARGET_DIR", scaffolds_target())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("could not install wasm-opt"), "{stderr}");
    assert!(stderr.contains("NOT optimized"), "{stderr}");
    assert!(report_line(&stdout, "budget").contains("not checked"), "{stdout}");
    serves_as_echo(
        &scaffolds_target().join("wasm32-unknown-unknown/release/bare.opt.wasm"),
        "bare",
    );
}

#[test]
fn every_template_builds_and_passes_its_own_tests() {
    let dir = tempfile::tempdir().unwrap();
    for template in ["echo", "kv", "auth", "http-component"] {
        let module = scaffold(dir.path(), template);
        // The generated tests run natively, as `cargo test` in the new crate runs them.
        let out = Command::new(env!("CARGO"))
            .arg("test")
            .current_dir(module.parent().unwrap())
            .env(
                "CARGO_TARGET_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffolds-native"),
            )
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{template}: {stdout}\n{}", text(&out.stderr));
        let passed = stdout.lines().find(|l| l.starts_with("test result: ok.")).unwrap_or("");
        assert!(
            !passed.starts_with("test result: ok. 0 passed"),
            "{template}: no tests ran\n{stdout}"
        );
    }
}

#[test]
fn a_module_over_its_budget_exits_3_with_the_report() {
    if wasm_opt().is_none() {
        let why =
            "the budget applies to optimized modules, and there is no wasm-opt (tools/install)";
        crate::support::skipped("a module over its size budget", why, "EDGEGATE_REQUIRE_WASM_OPT");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let module = scaffold(dir.path(), "echo");
    let out =
        build(&dir.path().join("my-echo"), &["--budget", "1KB", "-o", module.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("OVER") && stdout.contains("largest functions"), "{stdout}");
    // Function names are demangled: `edgegate_abi::request::RequestView::parse`, not `_ZN…E`.
    let functions: Vec<&str> =
        stdout.lines().skip_while(|l| !l.contains("largest functions")).skip(1).collect();
    assert!(functions.iter().any(|l| l.contains("::")), "{stdout}");
    assert!(!functions.iter().any(|l| l.contains("_ZN") || l.contains(" _R")), "{stdout}");
    assert!(text(&out.stderr).contains("over the budget of 1.0 KB"), "{}", text(&out.stderr));
}

#[test]
fn check_names_an_import_the_host_does_not_provide() {
    // With a second broken worker: one run names both, not only the first.
    let (code, _, stderr) = check(&format!(
        "[workers.t]\nmodule = {:?}\n[workers.u]\nmodule = \"no-such-file.wasm\"\n",
        edgegate_guests::UNKNOWN_IMPORT
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("`edgegate_v1::teleport`"), "{stderr}");
    assert!(stderr.contains("2 errors:"), "{stderr}");
    assert!(
        stderr.contains("workers.u.module") && stderr.contains("no-such-file.wasm"),
        "{stderr}"
    );
}

#[test]
fn check_reports_each_workers_abi_imports_and_memory() {
    let (code, stdout, stderr) = check(&format!(
        "[workers.h]\nmodule = {:?}\nlimits.memory = \"4MiB\"\n",
        edgegate_guests::HOSTILE
    ));
    assert_eq!(code, Some(0), "{stderr}");
    let line =
        stdout.lines().find(|l| l.starts_with("worker h:")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("ABI v1") && line.contains("imports satisfied"), "{line}");
    assert!(line.contains("within its 4MiB limit"), "{line}");
}

#[test]
fn a_compiled_module_serves_and_one_from_other_settings_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cwasm = dir.path().join("hostile.cwasm");
    let out = edgegate(&["compile", edgegate_guests::HOSTILE, "-o", cwasm.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let worker = |module: &Path| {
        format!(
            "[workers.h]\nmodule = {:?}\n[[routes]]\nprefix = \"/h\"\nworker = \"h\"\n",
            module.display().to_string()
        )
    };
    let (code, stdout, stderr) = check(&worker(&cwasm));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("(precompiled)"), "{stdout}");
    let gateway = Gateway::start(&format!("{}\n{}", runtime_section(), worker(&cwasm)));
    assert_eq!(get(gateway.addr, "/h/ok").status, 200);

    // Wasmtime's default settings (no epoch interruption) are not the gateway's.
    let theirs = wasmtime::Engine::new(&wasmtime::Config::new()).unwrap();
    let other = dir.path().join("other.cwasm");
    let wasm = std::fs::read(edgegate_guests::HOSTILE).unwrap();
    std::fs::write(&other, theirs.precompile_module(&wasm).unwrap()).unwrap();
    let (code, _, stderr) = check(&worker(&other));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("compile it again with `edgegate compile`"), "{stderr}");
}
