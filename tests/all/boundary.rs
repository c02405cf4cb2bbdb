//! What a deploy through the admin API can reach, each way it once reached past its own
//! worker (issue 50's table), through the real binary: native code, a path in a table, traffic
//! another owner routes, capabilities and limits nobody granted.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Gateway, admin_api, deploy_form, post, runtime_section};

/// The admin token of these sites: long enough to be a secret.
const ADMIN: &str = "boundary-admin-token-0123456789abcdef";

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
