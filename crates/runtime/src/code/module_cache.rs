//! The on-disk cache of compiled modules, so that each module is compiled by Cranelift once,
//! not at every start.
//!
//! An entry is named `<sha256 of the wasm>-<engine hash>.cwasm`, where the engine hash covers
//! Wasmtime's version and every compilation setting
//! ([`Engine::precompile_compatibility_hash`]): change either and the name changes, so a stale
//! entry is never even opened. Each file carries its own check:
//!
//! ```text
//! "edgegate-cwasm-1"  16 bytes  magic and format version
//! sha256(wasm)        32 bytes  which module this is
//! sha256(payload)     32 bytes  integrity of what follows
//! payload             …         Module::serialize or Component::serialize output
//! ```
//!
//! Whether an entry holds a module or a component follows from the Wasm bytes it was compiled
//! from, whose sha256 it carries.
//!
//! An entry that fails any check (truncated, corrupted, written for another module, or refused
//! by Wasmtime's own compatibility check) is compiled again and replaced, never loaded. Entries
//! are written to a temporary file and renamed into place, so a crash leaves no half entry.
//!
//! Loading an entry runs its native code: the cache directory must be writable only by the
//! gateway's user (it is created with mode 0700).
//!
//! Each deployed version of a worker adds an entry, so the cache prunes itself
//! ([`ModuleCache::prune`], after start-up, then after reloads and deploys at most once per
//! [`crate::code::prune::PRUNE_INTERVAL`]): an entry's modification
//! time is set whenever it is loaded, so it says when it was last used, and entries unused for
//! [`Pruning::max_age`] are removed, then the least recently used ones while the whole is
//! over [`Pruning::max_size`]. Entries the running configuration uses are never removed, nor
//! is anything but this cache's own files (`*.cwasm`, and temporary files a crash left over an
//! hour ago). Several gateways may share a directory: an entry another one uses is at worst
//! compiled again at its next start.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use wasmtime::Engine;

use crate::code::compiled::{Abi, Compiled, ModuleInfo};

const MAGIC: &[u8; 16] = b"edgegate-cwasm-1";
/// The extension of an entry's check record, beside its `.cwasm`.
const CHECKED: &str = "checked";
const HEADER_LEN: usize = 16 + 32 + 32;

/// What the cache did for one module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded a valid entry; nothing was compiled.
    Hit,
    /// No entry: compiled and stored one.
    Miss,
    /// An entry existed but failed a check (the reason); compiled and replaced it.
    Rejected(String),
    /// A precompiled module (`edgegate compile`): loaded as it is, no cache involved.
    Precompiled,
    /// Compiled, but the entry could not be written (the reason); the next start compiles
    /// again.
    NotStored(String),
}

/// When entries are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pruning {
    /// An entry no load has used for this long is removed. Default 7 days.
    pub max_age: Duration,
    /// Past this many bytes of entries in all, the least recently used are removed. Default
    /// 1 GiB.
    pub max_size: u64,
}

impl Default for Pruning {
    fn default() -> Self {
        Self { max_age: Duration::from_secs(7 * 24 * 3600), max_size: 1 << 30 }
    }
}

/// What a prune did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Entries (and left-over temporary files) removed.
    pub removed: usize,
    /// Their bytes.
    pub bytes: u64,
    /// The bytes of the entries kept.
    pub kept: u64,
}

/// Where the gateway keeps the modules it pulled from registries, under the cache's directory:
/// each named by its sha256 in hex. A prune removes those no live worker runs that were
/// written more than [`Pruning::max_age`] ago (they are pulled again if named again).
pub const PULLED_MODULES: &str = "oci/blobs/sha256";

/// How old a temporary file must be before a prune takes it for a crash's leftover.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// A directory of compiled modules for one engine configuration.
#[derive(Debug, Clone)]
pub struct ModuleCache {
    dir: PathBuf,
    pruning: Pruning,
}

impl ModuleCache {
    /// A cache in `dir`, created (mode 0700) if missing, pruned by the default [`Pruning`].
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        Ok(Self { dir, pruning: Pruning::default() })
    }

    /// The same cache, pruned by `pruning`.
    pub fn with_pruning(self, pruning: Pruning) -> Self {
        Self { pruning, ..self }
    }

    /// Removes, as of `now`, the entries unused for [`Pruning::max_age`], then the least
    /// recently used while the rest is over [`Pruning::max_size`]; never one of the modules
    /// in `keep` (their sha256s in hex: the modules the running workers use).
    pub fn prune(
        &self,
        keep: &std::collections::HashSet<String>,
        now: SystemTime,
    ) -> std::io::Result<Pruned> {
        let kept =
            |name: &str| name.split_once('-').is_some_and(|(digest, _)| keep.contains(digest));
        let mut pruned = Pruned::default();
        let mut entries = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            let used = meta.modified().unwrap_or(now);
            let age = now.duration_since(used).unwrap_or_default();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".tmp-") {
                if age > STALE_TEMPORARY && fs::remove_file(&path).is_ok() {
                    pruned.removed += 1;
                    pruned.bytes += meta.len();
                }
                continue;
            }
            if meta.is_file() && name.ends_with(".checked") {
                // A check record goes with its entry, or when its module has been unused (and
                // its entry gone) for the max age.
                let entry = path.with_extension("cwasm");
                if !kept(&name) && age > self.pruning.max_age && !entry.exists() {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            if !meta.is_file() || !name.ends_with(".cwasm") {
                continue;
            }
            let in_use = kept(&name);
            if !in_use && age > self.pruning.max_age {
                if remove_entry(&path) {
                    pruned.removed += 1;
                    pruned.bytes += meta.len();
                }
                continue;
            }
            entries.push((in_use, used, meta.len(), path));
        }
        // The least recently used first; those in use last of all.
        entries.sort_by_key(|(kept, used, _, _)| (*kept, *used));
        let mut total: u64 = entries.iter().map(|(_, _, len, _)| len).sum();
        for (kept, _, len, path) in entries {
            if total <= self.pruning.max_size || kept {
                break;
            }
            if remove_entry(&path) {
                pruned.removed += 1;
                pruned.bytes += len;
                total -= len;
            }
        }
        pruned.kept = total;
        self.prune_pulled(keep, now, &mut pruned);
        Ok(pruned)
    }

    /// The pulled modules' part of [`ModuleCache::prune`].
    fn prune_pulled(
        &self,
        keep: &std::collections::HashSet<String>,
        now: SystemTime,
        pruned: &mut Pruned,
    ) {
        let Ok(entries) = fs::read_dir(self.dir.join(PULLED_MODULES)) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() || keep.contains(name.as_ref()) {
                continue;
            }
            let age = now.duration_since(meta.modified().unwrap_or(now)).unwrap_or_default();
            let stale = if name.starts_with(".tmp") {
                age > STALE_TEMPORARY
            } else {
                name.len() == 64 && age > self.pruning.max_age
            };
            if stale && fs::remove_file(entry.path()).is_ok() {
                pruned.removed += 1;
                pruned.bytes += meta.len();
            }
        }
    }

    /// The default location: `$XDG_CACHE_HOME/edgegate/modules`, else
    /// `~/.cache/edgegate/modules`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
        Some(base.join("edgegate").join("modules"))
    }

    /// The entry for the module whose sha256 is `wasm_hash`, if there is a valid one; `Err`
    /// says why one that exists was refused.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        wasm_hash: &[u8; 32],
        abi: Abi,
    ) -> Result<Option<Compiled>, String> {
        let path = self.entry_path(engine, wasm_hash);
        match fs::read(&path) {
            Ok(entry) => {
                let compiled =
                    load_entry(engine, &entry, wasm_hash, abi).map_err(|r| r.to_string())?;
                // Its modification time says when it was last used: what pruning reads.
                let _ = fs::File::open(&path).and_then(|f| f.set_modified(SystemTime::now()));
                Ok(Some(compiled))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("unreadable: {e}")),
        }
    }

    /// Loads the compiled form of `wasm` (a module or a component), whose sha256 is
    /// `wasm_hash`, from the cache, or compiles and stores it.
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        wasm_hash: &[u8; 32],
    ) -> wasmtime::Result<(Compiled, CacheOutcome)> {
        let rejected = match self.load(engine, wasm_hash, Abi::of(wasm)) {
            Ok(Some(compiled)) => return Ok((compiled, CacheOutcome::Hit)),
            Ok(None) => None,
            Err(reason) => Some(reason),
        };
        let compiled = Compiled::compile(engine, wasm)?;
        let path = self.entry_path(engine, wasm_hash);
        let outcome = match store_entry(&path, &compiled, wasm_hash) {
            Err(e) => CacheOutcome::NotStored(format!("{}: {e}", path.display())),
            Ok(()) => match rejected {
                Some(reason) => CacheOutcome::Rejected(reason),
                None => CacheOutcome::Miss,
            },
        };
        Ok((compiled, outcome))
    }

    /// What an earlier full check of the module whose sha256 is `wasm_hash` found (compiled,
    /// checked against the ABI, instantiated once), recorded by [`ModuleCache::record_checked`]:
    /// a start trusts it instead of compiling the module again.
    pub(crate) fn checked(&self, engine: &Engine, wasm_hash: &[u8; 32]) -> Option<ModuleInfo> {
        let bytes = fs::read(self.entry_path(engine, wasm_hash).with_extension(CHECKED)).ok()?;
        let info: ModuleInfo = serde_json::from_slice(&bytes).ok()?;
        (info.digest == hex(wasm_hash)).then_some(info)
    }

    /// Records that the module described by `info` passed a full check with this engine.
    pub(crate) fn record_checked(&self, engine: &Engine, wasm_hash: &[u8; 32], info: &ModuleInfo) {
        let path = self.entry_path(engine, wasm_hash).with_extension(CHECKED);
        let written = serde_json::to_vec(info)
            .map_err(std::io::Error::other)
            .and_then(|json| write_atomically(&path, &[&json]));
        if let Err(e) = written {
            tracing::debug!(path = %path.display(), "check not recorded: {e}");
        }
    }

    /// Where the entry for this module and engine lives.
    pub fn entry_path(&self, engine: &Engine, wasm_hash: &[u8; 32]) -> PathBuf {
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir.join(format!("{}-{:016x}.cwasm", hex(wasm_hash), hasher.finish()))
    }
}

/// Removes an entry and its check record; whether the entry went.
fn remove_entry(path: &Path) -> bool {
    let removed = fs::remove_file(path).is_ok();
    if removed {
        let _ = fs::remove_file(path.with_extension(CHECKED));
    }
    removed
}

/// Why a cache entry was not loaded.
#[derive(Debug, thiserror::Error)]
enum Rejection {
    #[error("truncated header")]
    Truncated,
    #[error("not an edgegate cache entry")]
    NotAnEntry,
    #[error("written for another module")]
    OtherModule,
    #[error("checksum mismatch")]
    Checksum,
    #[error("refused by wasmtime: {0}")]
    Refused(wasmtime::Error),
}

fn load_entry(
    engine: &Engine,
    entry: &[u8],
    wasm_hash: &[u8; 32],
    abi: Abi,
) -> Result<Compiled, Rejection> {
    let Some((header, payload)) = entry.split_at_checked(HEADER_LEN) else {
        return Err(Rejection::Truncated);
    };
    if &header[..16] != MAGIC {
        return Err(Rejection::NotAnEntry);
    }
    if &header[16..48] != wasm_hash {
        return Err(Rejection::OtherModule);
    }
    if header[48..80] != sha256(payload) {
        return Err(Rejection::Checksum);
    }
    // SAFETY: deserializing runs the payload's machine code later, so it must be a
    // `serialize` output of a compatible engine. The payload's checksum matches the one this
    // cache wrote next to it, for this very module; the directory is private to the gateway's
    // user (see the module docs); and Wasmtime itself refuses payloads from another version
    // or configuration.
    unsafe { Compiled::deserialize(engine, payload, abi) }.map_err(Rejection::Refused)
}

fn store_entry(path: &Path, compiled: &Compiled, wasm_hash: &[u8; 32]) -> anyhow::Result<()> {
    let payload = compiled.serialize()?;
    write_atomically(path, &[MAGIC, wasm_hash, &sha256(&payload), &payload])?;
    Ok(())
}

/// Writes `parts` to a temporary file beside `path`, then renames it into place: a crash
/// leaves no half file.
fn write_atomically(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile_in(dir)?;
    for part in parts {
        tmp.1.write_all(part)?;
    }
    tmp.1.sync_all()?;
    fs::rename(&tmp.0, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp.0);
    })
}

/// A new, uniquely named file in `dir`.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, fs::File)> {
    let unique = format!(".tmp-{}-{:x}", std::process::id(), rand_u64());
    let path = dir.join(unique);
    let file = fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
    Ok((path, file))
}

fn rand_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // A clash only makes `create_new` fail, which the caller reports as "not stored".
    let _ = getrandom::fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

/// A module's digest as edgegate names it everywhere (`ModuleInfo::digest`, logs, metrics,
/// a registry layer's `sha256:`): the sha256 of its bytes, in lower-case hex.
pub fn module_digest(wasm: &[u8]) -> String {
    hex(&sha256(wasm))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    /// A file of `len` bytes in `dir`, last modified `ago` before `now`.
    fn file(dir: &Path, name: &str, len: usize, now: SystemTime, ago: Duration) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, vec![0; len]).unwrap();
        fs::File::options().write(true).open(&path).unwrap().set_modified(now - ago).unwrap();
        path
    }

    #[test]
    fn entries_unused_for_the_max_age_go_and_those_in_use_stay() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ModuleCache::open(dir.path()).unwrap();
        let now = SystemTime::now();
        let old = file(dir.path(), "aa-1.cwasm", 10, now, 10 * DAY);
        let recent = file(dir.path(), "bb-1.cwasm", 10, now, 2 * DAY);
        let in_use = file(dir.path(), "cc-1.cwasm", 10, now, 30 * DAY);
        let crashed = file(dir.path(), ".tmp-1-ab", 10, now, 2 * STALE_TEMPORARY);
        let writing = file(dir.path(), ".tmp-2-cd", 10, now, Duration::from_secs(5));
        let foreign = file(dir.path(), "notes.txt", 10, now, 100 * DAY);
        let keep = ["cc".to_owned()].into();
        let pruned = cache.prune(&keep, now).unwrap();
        assert_eq!(pruned, Pruned { removed: 2, bytes: 20, kept: 20 });
        for (path, there) in [
            (old, false),
            (crashed, false),
            (recent, true),
            (in_use, true),
            (writing, true),
            (foreign, true),
        ] {
            assert_eq!(path.exists(), there, "{}", path.display());
        }
    }

    #[test]
    fn pulled_modules_go_when_unused_and_old() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ModuleCache::open(dir.path()).unwrap();
        let pulled = dir.path().join(PULLED_MODULES);
        fs::create_dir_all(&pulled).unwrap();
        let now = SystemTime::now();
        let name = |c: char| c.to_string().repeat(64);
        let old = file(&pulled, &name('a'), 10, now, 10 * DAY);
        let recent = file(&pulled, &name('b'), 10, now, DAY);
        let in_use = file(&pulled, &name('c'), 10, now, 30 * DAY);
        let crashed = file(&pulled, ".tmpXyZ", 10, now, 2 * STALE_TEMPORARY);
        let foreign = file(&pulled, "notes.txt", 10, now, 100 * DAY);
        let keep = [name('c')].into();
        assert_eq!(cache.prune(&keep, now).unwrap().removed, 2);
        for (path, there) in
            [(old, false), (crashed, false), (recent, true), (in_use, true), (foreign, true)]
        {
            assert_eq!(path.exists(), there, "{}", path.display());
        }
    }

    #[test]
    fn past_the_max_size_the_least_recently_used_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let pruning = Pruning { max_age: 30 * DAY, max_size: 1500 };
        let cache = ModuleCache::open(dir.path()).unwrap().with_pruning(pruning);
        let now = SystemTime::now();
        let oldest = file(dir.path(), "aa-1.cwasm", 1000, now, DAY);
        let newer = file(dir.path(), "bb-1.cwasm", 1000, now, Duration::from_secs(3600));
        let in_use = file(dir.path(), "cc-1.cwasm", 1000, now, 5 * DAY);
        let keep = ["cc".to_owned()].into();
        let pruned = cache.prune(&keep, now).unwrap();
        assert_eq!(pruned, Pruned { removed: 2, bytes: 2000, kept: 1000 });
        assert!(!oldest.exists() && !newer.exists() && in_use.exists());
        // Under the size, nothing more goes.
        assert_eq!(cache.prune(&keep, now).unwrap(), Pruned { removed: 0, bytes: 0, kept: 1000 });
    }
}
