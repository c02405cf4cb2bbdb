//! A worker's `oci://` reference resolved to a digest and its module pulled: at start-up,
//! at every reload, and by `edgegate check`.
//!
//! A tag is resolved with one `HEAD` of its manifest. A manifest seen before (its module in
//! the [`Store`]) costs nothing more; a new one is fetched by digest, its one
//! `application/wasm` layer pulled within `[registry] max_module`, and the bytes checked
//! against the layer's digest (while they stream, by `oci-client`, and again whole) before
//! they are stored. The runtime checks the stored file against that digest once more before
//! compiling it.
//!
//! At start-up, a registry out of reach (no connection, a timeout, a 5xx) is not fatal: the
//! reference is served as it last resolved, from the store, with a warning. A reload or a
//! check has no such fallback: it fails, and a reload leaves the running version serving.

use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use edgegate_runtime::Source;
use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};

use super::store::{Digest, Store};
use super::{Credentials, RegistryError, WASM_LAYER, parse};

/// How references are resolved: `[registry]`'s settings, and where modules are kept.
#[derive(Debug)]
pub struct Pull {
    /// Registries (`host[:port]`) spoken to over plain HTTP, besides those on loopback.
    pub insecure: Vec<String>,
    /// The longest one reference may take to resolve and pull.
    pub timeout: std::time::Duration,
    /// The largest module a pull accepts.
    pub max_module: edgegate_runtime::ByteSize,
    /// The clients, one per registry.
    pub clients: std::sync::Arc<super::Clients>,
    /// Credentials, read once per registry: make one for each pass over the references.
    pub credentials: Credentials,
    /// Where pulled modules are kept; `None` (no module cache): in memory only, and a start
    /// with the registry out of reach fails.
    pub store: Option<Store>,
    /// Whether a reference whose registry is out of reach may be served as it last resolved:
    /// at start-up, not at a reload or a check.
    pub fallback: bool,
}

/// A reference resolved, and its module at hand.
#[derive(Debug)]
pub struct Pulled {
    /// The manifest the reference resolved to.
    pub manifest: Digest,
    /// The module's digest (the layer's).
    pub layer: Digest,
    /// The module, for the runtime: its file in the store (checked against `layer` at every
    /// read), or its bytes (without a store).
    pub module: Source,
    /// How it was found.
    pub resolution: Resolution,
}

/// How a reference was resolved.
#[derive(Debug)]
pub enum Resolution {
    /// Asked of the registry; the module pulled now.
    Pulled,
    /// Asked of the registry; the module was already in the store.
    Stored,
    /// The registry was out of reach: as the reference last resolved, from the store.
    Fallback(RegistryError),
}

impl Pull {
    /// Resolves `text` (`oci://…`) and makes its module available, pulling at most
    /// `max_module` (or [`Pull::max_module`], if that is less).
    pub async fn resolve(
        &self,
        text: &str,
        max_module: edgegate_runtime::ByteSize,
    ) -> Result<Pulled, RegistryError> {
        let reference = parse(text)?;
        let registry = reference.resolve_registry().to_owned();
        let after = self.timeout;
        let max = edgegate_runtime::ByteSize(max_module.bytes().min(self.max_module.bytes()));
        let online = tokio::time::timeout(after, self.online(text, &reference, max))
            .await
            .unwrap_or(Err(RegistryError::Timeout { registry, after }));
        match online {
            Err(error) if self.fallback && error.is_unreachable() => {
                match self.offline(text, &reference) {
                    Some((manifest, layer, module)) => Ok(Pulled {
                        manifest,
                        layer,
                        module,
                        resolution: Resolution::Fallback(error),
                    }),
                    None => Err(RegistryError::Unreachable(Box::new(error))),
                }
            }
            online => online,
        }
    }

    /// Resolved by the registry.
    async fn online(
        &self,
        text: &str,
        reference: &Reference,
        max: edgegate_runtime::ByteSize,
    ) -> Result<Pulled, RegistryError> {
        let registry = reference.resolve_registry().to_owned();
        let auth = self.credentials.get(&registry).await?;
        let insecure = self.insecure.contains(&registry);
        let client = self.clients.get(reference, insecure, self.timeout, &auth);
        let failed = |source| RegistryError::Registry { registry: registry.clone(), source };
        let manifest = match reference.digest() {
            Some(digest) => digest.to_owned(),
            None => client.fetch_manifest_digest(reference, &auth).await.map_err(failed)?,
        };
        let manifest = Digest::parse(&manifest).ok_or_else(|| {
            RegistryError::NotAWorker(format!("the manifest's digest `{manifest}` is not sha256"))
        })?;
        if let Some((layer, module)) = self.stored(&manifest) {
            self.record(text, &manifest, None)?;
            return Ok(Pulled { manifest, layer, module, resolution: Resolution::Stored });
        }
        let pinned = reference.clone_with_digest(manifest.to_string());
        let (image, _) = client.pull_image_manifest(&pinned, &auth).await.map_err(failed)?;
        let (descriptor, layer) = wasm_layer(&image)?;
        let size = u64::try_from(descriptor.size).unwrap_or(u64::MAX);
        if size > max.bytes() {
            return Err(RegistryError::TooLarge { size, max });
        }
        let mut out = Bounded { bytes: Vec::with_capacity(size as usize), max, over: false };
        let pulled = client.pull_blob(&pinned, descriptor, &mut out).await;
        if out.over {
            // The manifest understated the size.
            return Err(RegistryError::TooLarge { size: out.bytes.len() as u64, max });
        }
        pulled.map_err(|source| match source {
            oci_client::errors::OciDistributionError::DigestError(
                oci_client::errors::DigestError::VerificationError { expected, actual },
            ) => RegistryError::Tampered { expected, actual },
            source => failed(source),
        })?;
        let actual = Digest::of(&out.bytes);
        if actual != layer {
            return Err(RegistryError::Tampered {
                expected: layer.to_string(),
                actual: actual.to_string(),
            });
        }
        if !out.bytes.starts_with(b"\0asm") {
            return Err(RegistryError::NotWasm);
        }
        let module = match &self.store {
            Some(store) => stored(store.put_blob(&layer, &out.bytes)?, &layer),
            None => Source::Bytes(out.bytes.into()),
        };
        self.record(text, &manifest, Some(&layer))?;
        Ok(Pulled { manifest, layer, module, resolution: Resolution::Pulled })
    }

    /// The module of `manifest`, and its digest, if the store has it.
    fn stored(&self, manifest: &Digest) -> Option<(Digest, Source)> {
        let store = self.store.as_ref()?;
        let layer = store.layer_of(manifest)?;
        let module = stored(store.blob(&layer)?, &layer);
        Some((layer, module))
    }

    /// What `text` last resolved to, from the store alone.
    fn offline(&self, text: &str, reference: &Reference) -> Option<(Digest, Digest, Source)> {
        let manifest = match reference.digest() {
            Some(digest) => Digest::parse(digest)?,
            None => self.store.as_ref()?.resolved(text)?,
        };
        let (layer, module) = self.stored(&manifest)?;
        Some((manifest, layer, module))
    }

    /// Records what `text` resolved to (and, for a new manifest, its module).
    fn record(
        &self,
        text: &str,
        manifest: &Digest,
        layer: Option<&Digest>,
    ) -> Result<(), RegistryError> {
        let Some(store) = &self.store else { return Ok(()) };
        if let Some(layer) = layer {
            store.put_layer_of(manifest, layer)?;
        }
        store.put_resolved(text, manifest)
    }
}

/// A stored module, for the runtime to check against `layer` whenever it reads it.
fn stored(path: PathBuf, layer: &Digest) -> Source {
    Source::Pulled { path, sha256: layer.bytes() }
}

/// The manifest's one `application/wasm` layer, and its digest.
fn wasm_layer(image: &OciImageManifest) -> Result<(&OciDescriptor, Digest), RegistryError> {
    let mut wasm = image.layers.iter().filter(|layer| layer.media_type == WASM_LAYER);
    let (Some(layer), None) = (wasm.next(), wasm.next()) else {
        let types: Vec<&str> = image.layers.iter().map(|l| l.media_type.as_str()).collect();
        return Err(RegistryError::NotAWorker(format!(
            "it needs exactly one {WASM_LAYER} layer; its layers are [{}]",
            types.join(", ")
        )));
    };
    let digest = Digest::parse(&layer.digest).ok_or_else(|| {
        RegistryError::NotAWorker(format!("the layer's digest `{}` is not sha256", layer.digest))
    })?;
    Ok((layer, digest))
}

/// A download's bytes, refused past `max`.
struct Bounded {
    bytes: Vec<u8>,
    max: edgegate_runtime::ByteSize,
    /// Whether a write was refused.
    over: bool,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if (self.bytes.len() + buf.len()) as u64 > self.max.bytes() {
            self.over = true;
            return Poll::Ready(Err(std::io::Error::other(
                "larger than the largest module allowed",
            )));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
