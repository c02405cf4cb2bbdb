//! `edgegate push`: publish a built worker to an OCI registry.

use std::path::PathBuf;

use anyhow::Context;
use edgegate_host::registry;

/// Publish a built worker (a module or a component) to an OCI registry, as the Wasm artifact
/// `wkg oci push` and wasmCloud make: one `application/wasm` layer. Credentials come from
/// EDGEGATE_REGISTRY_USERNAME and EDGEGATE_REGISTRY_PASSWORD for the registry
/// EDGEGATE_REGISTRY_HOST names, or the docker config.json.
#[derive(Debug, clap::Args)]
pub struct PushCommand {
    /// The worker's `.wasm` file.
    path: PathBuf,
    /// Where: `oci://HOST[:PORT]/REPO:TAG`.
    reference: String,
    /// Allow plain HTTP to a registry that is not on loopback.
    #[arg(long)]
    insecure: bool,
}

impl PushCommand {
    /// Pushes, and prints the manifest's and the module's digests.
    pub fn execute(self) -> anyhow::Result<()> {
        let wasm = std::fs::read(&self.path)
            .with_context(|| format!("reading {}", self.path.display()))?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let pushed = runtime
            .block_on(registry::push(wasm, &self.reference, self.insecure))
            .with_context(|| format!("pushing {} to {}", self.path.display(), self.reference))?;
        println!("{}: manifest {}, module {}", self.reference, pushed.manifest, pushed.layer);
        Ok(())
    }
}
