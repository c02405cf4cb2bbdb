//! Pulled modules on disk, in `oci/` under the module cache's directory, so that a restart
//! with the registry out of reach still serves what each reference last resolved to:
//!
//! * `blobs/sha256/HEX`: a module, named by its sha256 (the runtime checks it against that
//!   name again before compiling it, and its cache prunes those no worker runs:
//!   [`edgegate_runtime::PULLED_MODULES`]);
//! * `manifests/sha256/HEX`: the digest of the module the manifest `sha256:HEX` names;
//! * `references/HEX`: `REFERENCE MANIFEST-DIGEST`, what a reference last resolved to, HEX the
//!   sha256 of the reference's text.
//!
//! A manifest and a blob never change under their digest, so a file found is a file that can
//! be trusted to be complete (each is written whole or not at all) and checked on use.

use std::fs;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use super::RegistryError;

/// A `sha256:` digest of 64 lower-case hex digits: the only kind a store file is named by, so
/// no digest a registry sends can name a path outside the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest(String);

impl Digest {
    /// `text` if it is `sha256:` and 64 lower-case hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix("sha256:")?;
        let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        valid.then(|| Self(hex.to_owned()))
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(edgegate_runtime::module_digest(bytes))
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0
    }

    /// The 32 bytes.
    pub fn bytes(&self) -> [u8; 32] {
        let mut out = [0; 32];
        for (i, pair) in self.0.as_bytes().chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16).unwrap_or_default() as u8;
            out[i] = digit(pair[0]) << 4 | digit(pair[1]);
        }
        out
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

/// The store of pulled modules: its three directories.
#[derive(Debug, Clone)]
pub struct Store {
    blobs: PathBuf,
    manifests: PathBuf,
    references: PathBuf,
}

impl Store {
    /// The store of the module cache in `cache`, its directories created (mode 0700) if
    /// missing.
    pub fn open(cache: &Path) -> Result<Self, RegistryError> {
        let store = Self {
            blobs: cache.join(edgegate_runtime::PULLED_MODULES),
            manifests: cache.join("oci/manifests/sha256"),
            references: cache.join("oci/references"),
        };
        for path in [&store.blobs, &store.manifests, &store.references] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|source| RegistryError::Store { path: path.clone(), source })?;
        }
        Ok(store)
    }

    /// Where the module whose digest is `layer` is, or would be, stored.
    fn blob_path(&self, layer: &Digest) -> PathBuf {
        self.blobs.join(layer.hex())
    }

    /// The stored module whose digest is `layer`, if there is one.
    pub(super) fn blob(&self, layer: &Digest) -> Option<PathBuf> {
        let path = self.blob_path(layer);
        path.is_file().then_some(path)
    }

    /// Stores `bytes`, whose digest is `layer`.
    pub(super) fn put_blob(&self, layer: &Digest, bytes: &[u8]) -> Result<PathBuf, RegistryError> {
        let path = self.blob_path(layer);
        write(&path, bytes)?;
        Ok(path)
    }

    /// The module digest the manifest `manifest` names, if it was stored.
    pub(super) fn layer_of(&self, manifest: &Digest) -> Option<Digest> {
        let text = fs::read_to_string(self.manifests.join(manifest.hex())).ok()?;
        Digest::parse(text.trim())
    }

    /// Records that manifest `manifest` names the module `layer`.
    pub(super) fn put_layer_of(
        &self,
        manifest: &Digest,
        layer: &Digest,
    ) -> Result<(), RegistryError> {
        record(&self.manifests.join(manifest.hex()), &format!("{layer}\n"))
    }

    /// The manifest `reference` last resolved to, if it was recorded.
    pub(super) fn resolved(&self, reference: &str) -> Option<Digest> {
        let text = fs::read_to_string(self.reference_path(reference)).ok()?;
        let (named, manifest) = text.trim().rsplit_once(' ')?;
        (named == reference).then(|| Digest::parse(manifest)).flatten()
    }

    /// Records that `reference` resolved to `manifest`.
    pub(super) fn put_resolved(
        &self,
        reference: &str,
        manifest: &Digest,
    ) -> Result<(), RegistryError> {
        record(&self.reference_path(reference), &format!("{reference} {manifest}\n"))
    }

    fn reference_path(&self, reference: &str) -> PathBuf {
        self.references.join(Digest::of(reference.as_bytes()).hex())
    }
}

/// Writes a record's `text` to `path`, unless the file holds it already: a resolution that
/// changed nothing writes nothing.
fn record(path: &Path, text: &str) -> Result<(), RegistryError> {
    if fs::read_to_string(path).is_ok_and(|stored| stored == text) {
        return Ok(());
    }
    write(path, text.as_bytes())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    crate::atomic::write(path, bytes)
        .map_err(|source| RegistryError::Store { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sha256_hex_digests_name_files() {
        let hex = "0123456789abcdef".repeat(4);
        let digest = Digest::parse(&format!("sha256:{hex}")).unwrap();
        assert_eq!(digest.to_string(), format!("sha256:{hex}"));
        assert_eq!(digest.bytes()[..2], [0x01, 0x23]);
        for bad in [
            format!("sha512:{hex}"),
            format!("sha256:{}", hex.to_uppercase()),
            format!("sha256:{}", &hex[1..]),
            format!("sha256:../../{}", &hex[6..]),
            hex.clone(),
        ] {
            assert!(Digest::parse(&bad).is_none(), "{bad}");
        }
        assert_eq!(Digest::of(b"").hex(), edgegate_runtime::module_digest(b""));
    }

    #[test]
    fn what_is_stored_is_found_again_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let module = Digest::of(b"\0asm\x01\0\0\0");
        let manifest = Digest::of(b"{}");
        assert!(store.blob(&module).is_none() && store.layer_of(&manifest).is_none());
        let path = store.put_blob(&module, b"\0asm\x01\0\0\0").unwrap();
        assert_eq!(store.blob(&module), Some(path));
        store.put_layer_of(&manifest, &module).unwrap();
        assert_eq!(store.layer_of(&manifest), Some(module));
        let reference = "oci://127.0.0.1:5000/echo:v1";
        assert!(store.resolved(reference).is_none());
        store.put_resolved(reference, &manifest).unwrap();
        assert_eq!(store.resolved(reference), Some(manifest.clone()));
        assert!(store.resolved("oci://127.0.0.1:5000/echo:v2").is_none());
        let other = Digest::of(b"[]");
        store.put_resolved(reference, &other).unwrap();
        assert_eq!(store.resolved(reference), Some(other));
    }
}
