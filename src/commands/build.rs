//! `edgegate build`: a worker crate to a small, checked module.
//!
//! ```text
//!  cargo build --target wasm32-unknown-unknown ─▶ <lib>.wasm ─▶ wasm-opt -Oz … ─▶ <lib>.opt.wasm
//!  (in the crate's directory, so its             (raw)         (found, or installed   │
//!   .cargo/config.toml applies; rustup                          once per user)        │
//!   target add when the target is missing)                            report ◀────────┘
//!                                               optimized and over the budget: exit 3
//! ```
//!
//! Cargo reads `.cargo/config.toml` from the directory it runs in and those above, not from
//! the manifest's: the build runs in the crate's directory wherever `edgegate build` was
//! started, so the crate's 64 KiB stack setting always applies.
//!
//! A crate whose module embeds a component type (wit-bindgen's bindings, the `wasip2` crate)
//! is a `wasi:http` component: its optimized core module is wrapped with `wit-component`,
//! and the component is what is written, reported and held to the budget.
//!
//! The budget is for optimized modules. When no wasm-opt can be found or installed, the
//! module is built unoptimized, with a warning, and the budget is not checked: a first build
//! succeeds wherever cargo does.
//!
//! The crate may set its budget and extra wasm-opt flags in its manifest:
//!
//! ```toml
//! [package.metadata.edgegate]
//! budget = "64KB"
//! wasm-opt = ["--enable-simd"]
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use edgegate_runtime::ByteSize;
use serde::Deserialize;

use super::module_report::{ModuleReport, kb};

const TARGET: &str = "wasm32-unknown-unknown";

/// The exit code of a module over its budget.
pub const OVER_BUDGET: u8 = 3;

/// Build a worker crate for wasm32, optimize it with wasm-opt and check it against a budget.
#[derive(Debug, clap::Args)]
pub struct BuildCommand {
    /// The worker crate: its directory or its Cargo.toml.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// The largest the optimized module may be, e.g. 64KB (1000 bytes) or 64KiB; over it,
    /// the build exits 3. Default: the crate's `package.metadata.edgegate.budget`, if any.
    #[arg(long, value_name = "SIZE")]
    budget: Option<ByteSize>,
    /// The cargo profile.
    #[arg(long, default_value = "release")]
    profile: String,
    /// Where to write the module. Default: next to cargo's output, as `<lib>.opt.wasm`.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Do not install wasm-opt when none is found: build unoptimized instead.
    #[arg(long)]
    no_install: bool,
}

/// A module over its budget: `main` exits [`OVER_BUDGET`] for it.
#[derive(Debug, thiserror::Error)]
#[error("{module}: {} is over the budget of {}", kb(*size), kb(*budget))]
pub struct OverBudget {
    module: String,
    size: u64,
    budget: u64,
}

impl BuildCommand {
    /// Runs the build and prints the report.
    pub fn execute(self) -> anyhow::Result<()> {
        let manifest = manifest_path(&self.path)?;
        let dir = manifest.parent().unwrap_or(Path::new(".")).to_path_buf();
        let package = Package::of(&manifest, &dir)?;
        ensure_target(&dir)?;
        let status = cargo(&dir)?
            .args(["build", "--target", TARGET, "--profile", &self.profile])
            .arg("--manifest-path")
            .arg(&manifest)
            .args(["-p", &package.name])
            .status()
            .context("running cargo")?;
        if !status.success() {
            bail!("cargo build failed ({status})");
        }
        let profile_dir = match self.profile.as_str() {
            "dev" | "test" => "debug",
            "bench" => "release",
            other => other,
        };
        let built = package.target_directory.join(TARGET).join(profile_dir);
        let raw = built.join(format!("{}.wasm", package.lib));
        let out = self.out.unwrap_or_else(|| built.join(format!("{}.opt.wasm", package.lib)));
        let raw_bytes =
            std::fs::read(&raw).with_context(|| format!("reading {}", raw.display()))?;
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }

        let optimizer = match super::tools::find_wasm_opt(&dir) {
            Some(found) => Some(found),
            None if self.no_install => None,
            None => super::tools::install()
                .inspect_err(|e| eprintln!("warning: could not install wasm-opt: {e:#}"))
                .ok(),
        };
        let optimized = match &optimizer {
            Some(wasm_opt) => {
                let status = Command::new(wasm_opt)
                    // The target-features section is read before it is stripped: it tells
                    // wasm-opt which features (bulk memory, sign-ext, …) the code uses.
                    .args(["-Oz", "--strip-debug", "--strip-producers", "--strip-target-features"])
                    .args(&package.wasm_opt)
                    .arg(&raw)
                    .arg("-o")
                    .arg(&out)
                    .status()
                    .with_context(|| format!("running {}", wasm_opt.display()))?;
                if !status.success() {
                    bail!("{} failed ({status})", wasm_opt.display());
                }
                true
            }
            None => {
                eprintln!(
                    "warning: no wasm-opt (PATH, node_modules up from the crate, or `edgegate tools install`): the module is NOT optimized, and its budget is not checked"
                );
                std::fs::copy(&raw, &out).with_context(|| format!("writing {}", out.display()))?;
                false
            }
        };
        let bytes = std::fs::read(&out).with_context(|| format!("reading {}", out.display()))?;
        let mut report = ModuleReport::read(&bytes)?;
        if ModuleReport::has_component_type(&bytes) {
            let component = wit_component::ComponentEncoder::default()
                .module(&bytes)
                .and_then(|encoder| encoder.validate(true).encode())
                .map_err(|e| anyhow::anyhow!("{}: making a component: {e:#}", package.name))?;
            std::fs::write(&out, &component)
                .with_context(|| format!("writing {}", out.display()))?;
            report = ModuleReport::of_component(&component, report)?;
        }
        // Function names come from the raw module: wasm-opt strips the name section.
        let named = ModuleReport::read(&raw_bytes)?;

        println!("{}: {}", package.name, out.display());
        println!("  raw:       {}", kb(raw_bytes.len() as u64));
        match &optimizer {
            Some(path) => {
                println!("  optimized: {} (wasm-opt at {})", kb(report.size), path.display())
            }
            None => println!("  optimized: no: wasm-opt was not found, the module is unoptimized"),
        }
        let budget = self.budget.or(package.budget).map(ByteSize::bytes);
        match budget {
            Some(budget) if !optimized => {
                println!("  budget:    {} (not checked: the module is unoptimized)", kb(budget))
            }
            Some(budget) => println!(
                "  budget:    {} ({})",
                kb(budget),
                if report.size <= budget { "within" } else { "OVER" }
            ),
            None => println!("  budget:    none"),
        }
        let shown = ModuleReport { largest: named.largest, ..report };
        print!("{shown}");
        if !optimized {
            println!("  (sizes are of the unoptimized module)");
        }
        let unknown = shown.unknown_imports();
        if !unknown.is_empty() {
            bail!(
                "{} imports what this host does not provide: {}",
                package.name,
                unknown.join(", ")
            );
        }
        match budget {
            Some(budget) if optimized && shown.size > budget => {
                Err(OverBudget { module: package.name, size: shown.size, budget }.into())
            }
            _ => Ok(()),
        }
    }
}

/// The crate's Cargo.toml, from its directory or itself.
fn manifest_path(path: &Path) -> anyhow::Result<PathBuf> {
    let manifest = if path.is_dir() { path.join("Cargo.toml") } else { path.to_path_buf() };
    anyhow::ensure!(manifest.is_file(), "{}: no Cargo.toml there", path.display());
    manifest.canonicalize().with_context(|| format!("reading {}", manifest.display()))
}

/// What the build needs to know about the crate, from `cargo metadata`.
#[derive(Debug)]
struct Package {
    name: String,
    /// The library's file stem (`-` becomes `_`).
    lib: String,
    target_directory: PathBuf,
    budget: Option<ByteSize>,
    wasm_opt: Vec<String>,
}

#[derive(Deserialize)]
struct Metadata {
    packages: Vec<MetaPackage>,
    target_directory: PathBuf,
}

#[derive(Deserialize)]
struct MetaPackage {
    name: String,
    manifest_path: PathBuf,
    targets: Vec<MetaTarget>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct MetaTarget {
    name: String,
    crate_types: Vec<String>,
}

impl Package {
    /// The package of `manifest`, as cargo sees it from `dir` (where the build runs).
    fn of(manifest: &Path, dir: &Path) -> anyhow::Result<Self> {
        let output = cargo(dir)?
            .args(["metadata", "--format-version", "1", "--no-deps", "--manifest-path"])
            .arg(manifest)
            .output()
            .context("running cargo metadata")?;
        if !output.status.success() {
            bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        let metadata: Metadata =
            serde_json::from_slice(&output.stdout).context("reading cargo metadata")?;
        let package = metadata
            .packages
            .into_iter()
            .find(|p| p.manifest_path == manifest)
            .with_context(|| format!("{}: not a package manifest", manifest.display()))?;
        let lib = package
            .targets
            .iter()
            .find(|t| t.crate_types.iter().any(|c| c == "cdylib"))
            .with_context(|| {
                format!(
                    "{}: no cdylib library; a worker needs `[lib] crate-type = [\"cdylib\"]`",
                    package.name
                )
            })?
            .name
            .replace('-', "_");
        let edgegate = package.metadata.as_ref().and_then(|m| m.get("edgegate"));
        let budget = match edgegate.and_then(|e| e.get("budget")) {
            None => None,
            Some(value) => Some(
                value
                    .as_str()
                    .context("package.metadata.edgegate.budget must be a string like \"64KB\"")?
                    .parse::<ByteSize>()
                    .context("package.metadata.edgegate.budget")?,
            ),
        };
        let wasm_opt = match edgegate.and_then(|e| e.get("wasm-opt")) {
            None => Vec::new(),
            Some(value) => serde_json::from_value(value.clone())
                .context("package.metadata.edgegate.wasm-opt must be a list of flags")?,
        };
        Ok(Self {
            name: package.name,
            lib,
            target_directory: metadata.target_directory,
            budget,
            wasm_opt,
        })
    }
}

/// Cargo, to run in the crate's directory `dir`. A relative `CARGO_TARGET_DIR` meant the
/// directory `edgegate build` was started in, so it is made absolute from there.
fn cargo(dir: &Path) -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(dir);
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from)
        && target.is_relative()
    {
        let here = std::env::current_dir().context("reading the current directory")?;
        command.env("CARGO_TARGET_DIR", here.join(target));
    }
    Ok(command)
}

/// Adds the wasm32 target with rustup when the crate's toolchain lacks it.
fn ensure_target(dir: &Path) -> anyhow::Result<()> {
    let installed = Command::new("rustc")
        .current_dir(dir)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|libdir| libdir.is_dir());
    if installed {
        return Ok(());
    }
    eprintln!("the {TARGET} target is missing: running `rustup target add {TARGET}`");
    let added = Command::new("rustup").current_dir(dir).args(["target", "add", TARGET]).status();
    match added {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => bail!(
            "`rustup target add {TARGET}` failed ({status}); install the target for this crate's toolchain and build again"
        ),
        Err(e) => bail!(
            "the {TARGET} target is missing and rustup could not be run ({e}); install the target (e.g. `rustup target add {TARGET}`) and build again"
        ),
    }
}
