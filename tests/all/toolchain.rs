//! The worker toolchain end to end: `edgegate new`, `build` (wasm-opt, the report, the
//! budget), `compile`, and `check`'s report, with the real binary, cargo and wasm-opt.

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
    eprintln!("!!! wasm-opt not installed ({why}): the scaffold is built unoptimized");
    None
}

/// `edgegate build` of `krate` into the shared test target directory.
fn build(krate: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_edgegate"));
    command
        .arg("build")
        .arg(krate)
        .args(args)
        .env("CARGO_TARGET_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffolds"));
    match wasm_opt() {
        Some(path) => command.env("EDGEGATE_WASM_OPT", path),
        None => command.env("EDGEGATE_WASM_OPT", "/nonexistent/wasm-opt"),
    };
    command.output().unwrap()
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
    assert!(stdout.contains("ABI:       v1"), "{stdout}");
    assert!(stdout.contains("all provided by this host"), "{stdout}");
    assert!(stdout.contains("within"), "the template fits its own budget: {stdout}");
    module
}

#[test]
fn a_scaffold_builds_serves_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let module = scaffold(dir.path(), "echo");
    let config = format!(
        "{}\n[workers.w]\nmodule = {:?}\n[[routes]]\nprefix = \"/\"\nworker = \"w\"\n",
        runtime_section(),
        module.display().to_string()
    );
    let gateway = Gateway::start(&config);
    let hello = get(gateway.addr, "/");
    assert_eq!((hello.status, hello.text()), (200, "hello from my-echo\n".to_string()));
    let echoed = post(gateway.addr, "/", b"ping");
    assert_eq!((echoed.status, echoed.text()), (200, "ping".to_string()));
}

#[test]
fn every_template_builds_and_passes_its_own_tests() {
    let dir = tempfile::tempdir().unwrap();
    for template in ["echo", "kv", "auth"] {
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
