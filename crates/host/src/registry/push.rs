//! `edgegate push`: a built worker published as a Wasm OCI artifact.

use oci_client::client::{Config, ImageLayer};

use super::{Credentials, Digest, RegistryError, WASM_CONFIG, WASM_LAYER, client, parse};

/// What a push made: the manifest's digest (what a tag resolves to) and the layer's (the
/// module's own sha256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `sha256:…` of the manifest.
    pub manifest: String,
    /// `sha256:…` of the module.
    pub layer: String,
}

/// Publishes `wasm` (a module or a component) as `reference`.
pub async fn push(wasm: Vec<u8>, reference: &str, insecure: bool) -> Result<Pushed, RegistryError> {
    let reference = parse(reference)?;
    let registry = reference.resolve_registry().to_owned();
    if !wasm.starts_with(b"\0asm") {
        return Err(RegistryError::NotWasm);
    }
    let layer_digest = Digest::of(&wasm).to_string();
    let os = match edgegate_runtime::Abi::of(&wasm) {
        edgegate_runtime::Abi::HttpComponent => "wasip2",
        edgegate_runtime::Abi::Core => "wasip1",
    };
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": os,
        "layerDigests": [layer_digest],
    });
    let config = Config::new(config.to_string().into_bytes(), WASM_CONFIG.to_owned(), None);
    let layer = ImageLayer::new(wasm, WASM_LAYER.to_owned(), None);
    let auth = Credentials::default().get(&registry).await?;
    let failed = |source| RegistryError::Registry { registry: registry.clone(), source };
    let client = client(&reference, insecure, None);
    let pushed = client.push(&reference, &[layer], config, &auth, None).await.map_err(failed)?;
    let manifest = pushed.manifest_url.rsplit('/').next().unwrap_or_default().to_owned();
    Ok(Pushed { manifest, layer: layer_digest })
}
