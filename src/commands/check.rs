//! `edgegate check`.

use anyhow::Context;
use edgegate_host::Gateway;
use edgegate_runtime::ByteSize;
use edgegate_runtime::{CacheOutcome, Checked};

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
    /// Prints each worker's ABI version, imports and memory; a module that does not fit (an
    /// unknown import, another ABI, too much memory) is an error that names what is wrong.
    /// An `oci://` module is resolved at its registry (which must answer, as for a reload),
    /// and the digests it resolved to are printed.
    pub fn execute(self) -> anyhow::Result<()> {
        let loaded = self.config.load()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        let gateway = runtime.block_on(Gateway::check(&loaded, edgegate_guests::BUILTIN))?;
        let resolved = gateway.resolved();
        for (name, worker) in gateway.workers() {
            let module = &loaded.config.workers[&name].module;
            let info = worker.module_info();
            // A registry reference: the manifest it resolved to, and the module's whole digest.
            let module = match resolved.get(module) {
                Some(manifest) => format!("{module} = {manifest}, module sha256:{}", info.digest),
                None => module.clone(),
            };
            let how = match worker.checked() {
                Checked::Loaded(CacheOutcome::Precompiled) => "precompiled",
                Checked::Loaded(CacheOutcome::Hit) => "compiled, from the cache",
                Checked::Loaded(_) => "compiled",
                Checked::Recorded | Checked::Unchanged => "checked before, as the cache records",
            };
            println!(
                "worker {name}: {module} ({how}): {}; imports satisfied ({}: {}); memory {} KiB initial{}, within its {} limit; sha256 {}",
                info.abi,
                info.imports.len(),
                info.imports.join(", "),
                info.initial_memory / 1024,
                info.maximum_memory
                    .map_or(String::new(), |m| format!(", {} KiB maximum", m / 1024)),
                ByteSize(worker.limits().memory),
                worker.short_digest(),
            );
        }
        println!(
            "{}: ok ({} workers, {} routes)",
            loaded.file,
            loaded.config.workers.len(),
            loaded.config.routes.len()
        );
        Ok(())
    }
}
