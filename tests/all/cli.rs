//! `edgegate check`, configuration errors, and exit codes.

use std::process::{Command, Output};

use crate::support::{runtime_section, write_config};

pub fn edgegate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgegate"))
        .args(args)
        .env_remove("EDGEGATE_CONFIG")
        .env("XDG_CACHE_HOME", crate::support::cache_dir().join("xdg"))
        .output()
        .unwrap()
}

/// `edgegate check` of `config` with the shared test cache: exit code, stdout, stderr.
pub fn check(config: &str) -> (Option<i32>, String, String) {
    check_exact(&format!("{}\n{config}", runtime_section()))
}

/// `edgegate check` of `config` as it is.
pub fn check_exact(config: &str) -> (Option<i32>, String, String) {
    let (_dir, path) = write_config(config);
    let out = edgegate(&["check", "--config", path.to_str().unwrap()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn check_accepts_a_good_config() {
    let (code, stdout, stderr) = check(&format!(
        "[workers.echo]\nmodule = \"builtin:echo-json\"\n[workers.h]\nmodule = \"{}\"\n\
         [[routes]]\npath = \"/echo\"\nworker = \"echo\"\n",
        edgegate_guests::HOSTILE
    ));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("edgegate.toml: ok (2 workers, 1 routes)"), "{stdout}");
}

#[test]
fn check_accepts_the_demo() {
    let out = edgegate(&["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Each broken config exits 1 with a message naming the file, the key and the problem.
#[test]
fn config_errors_name_file_key_and_problem() {
    for (config, key, problem) in [
        ("[server]\nbogus = 1\n", "server.bogus", "unknown field"),
        ("[workers.w]\nmodule = \"missing.wasm\"\n", "workers.w.module", "missing.wasm"),
        (
            "[workers.w]\nmodule = \"builtin:echo-json\"\nlimits.cpu = \"2 parsecs\"\n",
            "workers.w.limits.cpu",
            "parsecs",
        ),
        (
            &format!("[workers.w]\nmodule = \"{}\"\n", edgegate_guests::WRONG_ABI),
            "workers.w.module",
            "ABI v2",
        ),
        (
            &format!("[workers.w]\nmodule = \"{}\"\n", edgegate_guests::BIG_MEMORY),
            "workers.w.module",
            "memory",
        ),
        ("[[routes]]\npath = \"/\"\nworker = \"ghost\"\n", "routes[0].worker", "ghost"),
    ] {
        let (code, _, stderr) = check(config);
        assert_eq!(code, Some(1), "{config}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains("edgegate.toml"), "names the file: {first}");
        assert!(first.contains(key), "names the key {key}: {first}");
        assert!(stderr.contains(problem), "says {problem}: {stderr}");
    }
}

/// A configuration error that comes from another error prints that error's causes under it.
#[test]
fn config_errors_print_their_cause_chain() {
    let (code, _, stderr) = check("[workers.w]\nmodule = \"missing.wasm\"\n");
    assert_eq!(code, Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines[0].contains("workers.w.module: cannot read") && lines[0].contains("missing.wasm")
    );
    assert!(lines[1].contains("caused by: No such file or directory"), "{stderr}");
    let (code, _, stderr) =
        check(&format!("[workers.w]\nmodule = \"{}\"\n", edgegate_guests::WRONG_ABI));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.lines().next().unwrap_or_default().contains("cannot load"), "{stderr}");
    assert!(stderr.contains("caused by: built for edgegate ABI v2"), "{stderr}");
}

#[test]
fn serve_refuses_a_broken_config_with_exit_1() {
    let (_dir, path) = write_config("[server]\nlisten = \"nowhere\"\n");
    let out = edgegate(&["serve", "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("server.listen"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(edgegate(&["serve", "--no-such-flag"]).status.code(), Some(2));
    assert_eq!(edgegate(&["frobnicate"]).status.code(), Some(2));
}
