//! `edgegate tools`: the build tools `edgegate build` runs besides cargo, found or installed
//! once per user.
//!
//! wasm-opt (binaryen) is looked for, in order:
//!
//! ```text
//!  $EDGEGATE_WASM_OPT ─▶ PATH ─▶ node_modules/.bin or tools/node_modules/.bin, from the crate up
//!    ─▶ the per-user tools directory ─▶ not found: `edgegate build` installs it there (npm)
//! ```
//!
//! The per-user directory is `$EDGEGATE_TOOLS_DIR`, else `$XDG_CACHE_HOME/edgegate/tools`,
//! else `~/.cache/edgegate/tools`. The install is npm's `binaryen`, pinned by the same
//! `package.json` and `package-lock.json` as this repository's `tools/` (versions and
//! integrity hashes), with `npm ci --ignore-scripts`: the package ships wasm-opt as a
//! JavaScript and Wasm build, so Node is all it needs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

const PACKAGE_JSON: &str = include_str!("../../tools/package.json");
const PACKAGE_LOCK: &str = include_str!("../../tools/package-lock.json");

/// Manage the build tools `edgegate build` uses (wasm-opt).
#[derive(Debug, clap::Args)]
pub struct ToolsCommand {
    #[command(subcommand)]
    action: ToolsAction,
}

#[derive(Debug, clap::Subcommand)]
enum ToolsAction {
    /// Install wasm-opt (npm's binaryen, pinned) into the per-user tools directory.
    Install,
    /// Print the wasm-opt `edgegate build` would run from here, or say there is none.
    Which,
}

impl ToolsCommand {
    /// Runs the action.
    pub fn execute(self) -> anyhow::Result<()> {
        match self.action {
            ToolsAction::Install => {
                let path = install()?;
                println!("wasm-opt: {}", path.display());
            }
            ToolsAction::Which => {
                let here = std::env::current_dir().context("reading the current directory")?;
                match find_wasm_opt(&here) {
                    Some(path) => println!("wasm-opt: {}", path.display()),
                    None => bail!(
                        "no wasm-opt here; `edgegate tools install` puts one in {}",
                        tools_dir()?.display()
                    ),
                }
            }
        }
        Ok(())
    }
}

/// wasm-opt, without installing: `$EDGEGATE_WASM_OPT`, then PATH, then an npm `binaryen` in
/// `node_modules` or `tools/node_modules` of `dir` or any directory above it (this
/// repository's `tools/install`), then the per-user tools directory.
pub fn find_wasm_opt(dir: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("EDGEGATE_WASM_OPT").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|p| p.join("wasm-opt")).find(|p| p.is_file())
    });
    on_path
        .or_else(|| {
            dir.ancestors()
                .flat_map(|d| {
                    ["node_modules", "tools/node_modules"].map(|m| d.join(m).join(".bin/wasm-opt"))
                })
                .find(|p| p.is_file())
        })
        .or_else(|| tools_dir().ok().map(|d| installed(&d)).filter(|p| p.is_file()))
}

/// Installs wasm-opt into the per-user tools directory (again, if it is there already) and
/// returns its path.
pub fn install() -> anyhow::Result<PathBuf> {
    let dir = tools_dir()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (file, text) in [("package.json", PACKAGE_JSON), ("package-lock.json", PACKAGE_LOCK)] {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let npm = std::env::var_os("EDGEGATE_NPM").unwrap_or_else(|| "npm".into());
    eprintln!(
        "installing wasm-opt (npm binaryen, pinned) into {}: once for this user",
        dir.display()
    );
    let output = Command::new(&npm)
        .current_dir(&dir)
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"])
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => bail!(
            "could not run {} ({e}): wasm-opt comes from npm's binaryen; install Node.js and npm, or put wasm-opt on PATH",
            Path::new(&npm).display()
        ),
    };
    if !output.status.success() {
        bail!(
            "`npm ci` in {} failed ({}): {}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let path = installed(&dir);
    anyhow::ensure!(path.is_file(), "npm installed binaryen, but {} is missing", path.display());
    Ok(path)
}

/// Where wasm-opt is inside a tools directory.
fn installed(dir: &Path) -> PathBuf {
    dir.join("node_modules/.bin/wasm-opt")
}

/// The per-user tools directory.
fn tools_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("EDGEGATE_TOOLS_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set: set EDGEGATE_TOOLS_DIR")?;
    Ok(cache.join("edgegate/tools"))
}
