//! Builds the guest programs for `wasm32-unknown-unknown` and writes `guests.rs`, which names
//! them as constants.
//!
//! Rust guests are built by a nested `cargo build --profile wasm` in their own target directory
//! (the outer cargo holds the lock on its own); WAT test programs are assembled with `wat`.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-unknown-unknown";

/// The target of the std guest test program, built only when the toolchain has it (CI adds
/// it; the test says SKIPPED loudly without it).
const WASIP2: &str = "wasm32-wasip2";

/// The test program built for [`WASIP2`]: a component as rustc links it.
const WASIP2_PROGRAM: &str = "wasip2-std";

/// The demo workers, always built: the gateway binary embeds them.
const WORKERS: &[&str] = &[
    "echo-json",
    "echo-json-component",
    "auth-router",
    "kv-lookup",
    "kv-lookup-component",
    "fan-out",
    "image-resize",
    "image-resize-wasm",
    "json-transform",
];

/// Rust test programs, built with the `test-programs` feature.
const RUST_PROGRAMS: &[&str] = &["hostile", "http-component"];

/// Guests that are `wasi:http` components: built as core modules, then wrapped with
/// `wit-component` from the component type their bindings embed (no new rustup target).
const COMPONENTS: &[&str] = &["echo-json-component", "kv-lookup-component", "http-component"];

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().and_then(Path::parent).unwrap().to_path_buf();
    let test_programs = env::var_os("CARGO_FEATURE_TEST_PROGRAMS").is_some();

    for path in [
        "crates/abi",
        "crates/sdk",
        "workers",
        "crates/guests/programs",
        "crates/runtime/wit",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }
    println!("cargo:rerun-if-changed={}", workspace.join(".cargo/config.toml").display());

    let mut packages: Vec<&str> = WORKERS.to_vec();
    if test_programs {
        packages.extend_from_slice(RUST_PROGRAMS);
    }
    assert_target_installed();
    let built = build_rust_guests(&workspace, &out_dir, &packages, TARGET);

    let mut consts = String::new();
    for (package, path) in &built {
        let name = package.to_uppercase().replace('-', "_");
        let is_worker = WORKERS.contains(&package.as_str());
        let kind = if is_worker { "demo worker" } else { "test program" };
        writeln!(consts, "/// The `{package}` {kind}, built for {TARGET}.").unwrap();
        if is_worker {
            writeln!(consts, "pub const {name}: &[u8] = include_bytes!({:?});", path.display())
                .unwrap();
        } else {
            writeln!(consts, "#[cfg(feature = \"test-programs\")]").unwrap();
            writeln!(consts, "pub const {name}: &str = {:?};", path.display()).unwrap();
        }
    }
    if test_programs {
        let wasip2 = target_installed(WASIP2).then(|| {
            build_rust_guests(&workspace, &out_dir, &[WASIP2_PROGRAM], WASIP2).remove(0).1
        });
        let name = WASIP2_PROGRAM.to_uppercase().replace('-', "_");
        writeln!(
            consts,
            "/// The `{WASIP2_PROGRAM}` test program, built for {WASIP2}: `None` when the \
             toolchain lacks the target."
        )
        .unwrap();
        writeln!(consts, "#[cfg(feature = \"test-programs\")]").unwrap();
        writeln!(
            consts,
            "pub const {name}: Option<&str> = {:?};",
            wasip2.map(|p| p.display().to_string())
        )
        .unwrap();
        for path in wat_programs(&workspace.join("crates/guests/programs")) {
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            let wasm = wat::parse_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let dest = out_dir.join(format!("{stem}.wasm"));
            fs::write(&dest, wasm).unwrap();
            let name = stem.to_uppercase().replace('-', "_");
            writeln!(consts, "/// The `{stem}.wat` test program, assembled.").unwrap();
            writeln!(consts, "#[cfg(feature = \"test-programs\")]").unwrap();
            writeln!(consts, "pub const {name}: &str = {:?};", dest.display()).unwrap();
        }
    }
    fs::write(out_dir.join("guests.rs"), consts).unwrap();
}

fn wat_programs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wat"))
        .collect();
    files.sort();
    files
}

/// Builds `packages` for wasm32 and copies each `.wasm` into `out_dir`.
fn build_rust_guests(
    workspace: &Path,
    out_dir: &Path,
    packages: &[&str],
    target: &str,
) -> Vec<(String, PathBuf)> {
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out: share one guest target directory
    // per outer target directory, so debug, release and clippy builds reuse it.
    let target_dir = out_dir.ancestors().nth(4).unwrap().join("wasm-guests");
    let cargo = env::var_os("CARGO").unwrap();
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--locked", "--profile", "wasm", "--target", target])
        .arg("--target-dir")
        .arg(&target_dir);
    for package in packages {
        cmd.args(["-p", package]);
    }
    // Flags meant for the host build must not leak into the guest build; clippy's wrapper
    // would lint the guests a second time.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd.output().expect("failed to run cargo for the wasm32 guests");
    if !output.status.success() {
        panic!("building the wasm32 guests failed:\n{}", String::from_utf8_lossy(&output.stderr));
    }
    packages
        .iter()
        .map(|package| {
            let file = format!("{}.wasm", package.replace('-', "_"));
            let built = target_dir.join(target).join("wasm").join(&file);
            let dest = out_dir.join(format!("{package}.wasm"));
            if COMPONENTS.contains(package) {
                let module =
                    fs::read(&built).unwrap_or_else(|e| panic!("reading {}: {e}", built.display()));
                let component = wit_component::ComponentEncoder::default()
                    .module(&module)
                    .and_then(|encoder| encoder.validate(true).encode())
                    .unwrap_or_else(|e| panic!("{package}: making a component: {e:?}"));
                fs::write(&dest, component).unwrap();
            } else {
                fs::copy(&built, &dest)
                    .unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
            }
            (package.to_string(), dest)
        })
        .collect()
}

/// Fails with instructions instead of cargo's "can't find crate for `core`".
fn assert_target_installed() {
    if !target_installed(TARGET) {
        panic!(
            "the {TARGET} target is not installed for this toolchain.\n\
             Run `rustup target add {TARGET}` (scripts/demo and scripts/test do it for you)."
        );
    }
}

/// Whether this toolchain's sysroot has `target`'s standard library (assumed so when the
/// sysroot cannot be found). The answer is watched: the script runs again when the target is
/// added later (cargo reruns a script whose watched path does not exist yet), so an earlier
/// build without it is not kept.
fn target_installed(target: &str) -> bool {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    sysroot.is_none_or(|sysroot| {
        let lib = sysroot.join("lib/rustlib").join(target);
        println!("cargo:rerun-if-changed={}", lib.display());
        lib.exists()
    })
}
