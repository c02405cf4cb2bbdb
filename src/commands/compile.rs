//! `edgegate compile`: a module compiled ahead of time, so `serve` starts without Cranelift.

use std::path::PathBuf;

use anyhow::Context;
use edgegate_runtime::Runtime;

use super::ConfigArgs;

/// Compile a module for this host with the engine settings `serve` uses (those of the given
/// configuration, or the demo's). `serve` loads the `.cwasm` in place of the module and
/// refuses one built by another edgegate or with other settings.
#[derive(Debug, clap::Args)]
pub struct CompileCommand {
    /// The module (binary WebAssembly).
    module: PathBuf,
    /// Where to write the compiled module. Default: the module's path with `.cwasm`.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    config: ConfigArgs,
}

impl CompileCommand {
    /// Compiles and writes the `.cwasm`.
    pub fn execute(self) -> anyhow::Result<()> {
        let loaded = self.config.load()?;
        let wasm = std::fs::read(&self.module)
            .with_context(|| format!("reading {}", self.module.display()))?;
        let runtime = Runtime::new(edgegate_host::runtime_config(&loaded.config), None)?;
        let compiled = runtime
            .precompile(&wasm)
            .map_err(|e| anyhow::anyhow!("compiling {}: {e:#}", self.module.display()))?;
        let out = self.out.unwrap_or_else(|| self.module.with_extension("cwasm"));
        std::fs::write(&out, &compiled).with_context(|| format!("writing {}", out.display()))?;
        println!(
            "{}: {} bytes, for {} with the engine settings of {}",
            out.display(),
            compiled.len(),
            std::env::consts::ARCH,
            loaded.file
        );
        Ok(())
    }
}
