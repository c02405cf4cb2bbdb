//! `edgegate check`.

use edgegate_host::Gateway;

use super::ConfigArgs;

/// Check a configuration and its modules.
#[derive(Debug, clap::Args)]
pub struct CheckCommand {
    #[command(flatten)]
    config: ConfigArgs,
}

impl CheckCommand {
    /// Parses the configuration and loads every module exactly as `serve` would, without
    /// binding anything.
    pub fn execute(self) -> anyhow::Result<()> {
        let loaded = self.config.load()?;
        Gateway::build(&loaded, edgegate_guests::BUILTIN)?;
        println!(
            "{}: ok ({} workers, {} routes)",
            loaded.origin,
            loaded.config.workers.len(),
            loaded.config.routes.len()
        );
        Ok(())
    }
}
