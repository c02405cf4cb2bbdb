//! `edgegate check`.

use anyhow::Context;
use edgegate_host::Gateway;

use super::ConfigArgs;

/// Check a configuration and its modules.
#[derive(Debug, clap::Args)]
pub struct CheckCommand {
    #[command(flatten)]
    config: ConfigArgs,
}

impl CheckCommand {
    /// Parses the configuration and loads every module and key exactly as `serve` would
    /// (a JWKS URL that cannot be fetched is a warning: `serve` would start and retry),
    /// without binding the listeners, and checks the KV namespaces without opening them.
    pub fn execute(self) -> anyhow::Result<()> {
        let loaded = self.config.load()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        runtime.block_on(Gateway::check(&loaded, edgegate_guests::BUILTIN))?;
        println!(
            "{}: ok ({} workers, {} routes)",
            loaded.origin,
            loaded.config.workers.len(),
            loaded.config.routes.len()
        );
        Ok(())
    }
}
