//! Where a worker's bytes come from, so that its code can be loaded again after an eviction:
//! bytes held in memory, or a file read again (and checked against the digest taken when the
//! worker was checked). A module pulled from a registry is a file that must hash to the digest
//! it was pulled by, checked at every read, before anything compiles it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::error::LoadError;

/// A worker's module: a core module, a component or a `.cwasm`.
#[derive(Debug, Clone)]
pub enum Source {
    /// Bytes held in memory (a worker built into the binary, a test's module).
    Bytes(Bytes),
    /// A file. It is read when the worker is checked, and again only when its code is loaded
    /// and the module cache has no entry for it.
    File(PathBuf),
    /// A module pulled from a registry and stored by its digest: refused, whenever it is read,
    /// unless its sha256 is `sha256`.
    Pulled {
        /// The stored file.
        path: PathBuf,
        /// The digest it was pulled by.
        sha256: [u8; 32],
    },
}

/// What a file looked like, read through links: a reload whose file still looks the same
/// trusts the digest it had, without reading and hashing it again, and `serve --watch` tells
/// a changed file from an unchanged one by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl Stamp {
    /// `path`'s device, inode, size, and modification and change times.
    pub fn of(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Ok(Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified_ns: ns(meta.mtime(), meta.mtime_nsec()),
            changed_ns: ns(meta.ctime(), meta.ctime_nsec()),
        })
    }
}

impl Source {
    /// The bytes, their sha256, and for a file what it looked like before it was read (so
    /// that a change made while reading it shows at the next look).
    pub(crate) fn read(&self) -> Result<(Bytes, [u8; 32], Option<Stamp>), LoadError> {
        let (bytes, stamp) = match self {
            Self::Bytes(bytes) => (bytes.clone(), None),
            Self::File(path) | Self::Pulled { path, .. } => {
                let unreadable = |source| LoadError::Unreadable { path: path.clone(), source };
                let stamp = Stamp::of(path).map_err(unreadable)?;
                let bytes = std::fs::read(path).map_err(unreadable)?;
                (bytes.into(), Some(stamp))
            }
        };
        let digest = crate::code::module_cache::sha256(&bytes);
        if let Self::Pulled { path, sha256 } = self
            && digest != *sha256
        {
            let expected = crate::code::module_cache::hex(sha256);
            return Err(LoadError::NotPulled { path: path.clone(), expected });
        }
        Ok((bytes, digest, stamp))
    }

    /// The bytes again, for a load after the check: refused if they are no longer the ones
    /// whose sha256 is `digest`.
    pub(crate) fn read_again(&self, digest: &[u8; 32]) -> Result<Bytes, LoadError> {
        let (bytes, read, _) = self.read()?;
        if read != *digest {
            let path = match self {
                Self::File(path) | Self::Pulled { path, .. } => path.clone(),
                Self::Bytes(_) => PathBuf::new(),
            };
            return Err(LoadError::Changed { path });
        }
        Ok(bytes)
    }

    /// Whether `self` is surely the same bytes as `before`, read when it looked like `stamp`:
    /// the same memory, or the same file unchanged since.
    pub(crate) fn same_as(&self, before: &Self, stamp: Option<Stamp>) -> bool {
        match self {
            Self::Bytes(_) => self.names(before),
            Self::File(now) | Self::Pulled { path: now, .. } => {
                self.names(before) && stamp.is_some() && Stamp::of(now).ok() == stamp
            }
        }
    }

    /// Whether `self` names the same source as `before`: the same memory, or the same path
    /// (whatever the file holds now).
    pub(crate) fn names(&self, before: &Self) -> bool {
        match (self, before) {
            (Self::Bytes(now), Self::Bytes(then)) => {
                now.as_ptr() == then.as_ptr() && now.len() == then.len()
            }
            (Self::File(now), Self::File(then)) => now == then,
            (Self::Pulled { path: now, .. }, Self::Pulled { path: then, .. }) => now == then,
            _ => false,
        }
    }
}
