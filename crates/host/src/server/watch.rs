//! `serve --watch`: reload when the configuration file or a module file it names changes.
//!
//! The directories holding those files are watched (a deploy that renames a new file over the
//! old one replaces the inode, which a watch on the file itself would lose), and events are
//! debounced, so the burst of events one deploy makes is one reload. After each reload the set
//! of files is read again from the version serving.
//!
//! A file may change with no event naming it: in a Kubernetes ConfigMap volume,
//! `edgegate.toml` is a link to `..data/edgegate.toml`, and an update swaps the `..data`
//! link. So after any event in a watched directory, each file's stamp
//! ([`edgegate_runtime::Stamp`], read through links) is compared with the one seen before.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use edgegate_runtime::Stamp;
use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use parking_lot::Mutex;

use crate::Gateway;

/// How long a burst of events must be quiet before it reloads.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// Watches for changes; stops when dropped.
pub struct Watch {
    _debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

/// Why the watch could not start.
#[derive(Debug, thiserror::Error)]
#[error("watching {}", dir.display())]
pub struct WatchError {
    dir: PathBuf,
    #[source]
    source: notify::Error,
}

/// Starts watching `gateway`'s files; each change reloads it on the current tokio runtime.
pub fn watch(gateway: Arc<Gateway>) -> Result<Watch, WatchError> {
    let runtime = tokio::runtime::Handle::current();
    let watched = gateway.clone();
    let stamps: Mutex<BTreeMap<PathBuf, Option<Stamp>>> = Mutex::new(
        gateway
            .files()
            .iter()
            .filter_map(|f| canonical(f))
            .map(|f| (f.clone(), Stamp::of(&f).ok()))
            .collect(),
    );
    let on_events = move |result: DebounceEventResult| {
        let Ok(events) = result else { return };
        let files: BTreeSet<PathBuf> =
            watched.files().iter().filter_map(|f| canonical(f)).collect();
        let named = events.iter().flat_map(|e| e.paths.iter()).find(|p| files.contains(*p));
        // Every file's stamp is brought up to date; one newly watched is not a change.
        let mut stamps = stamps.lock();
        let restamped: Vec<&PathBuf> = files
            .iter()
            .filter(|f| {
                let now = Stamp::of(f).ok();
                matches!(stamps.insert((*f).clone(), now), Some(before) if before != now)
            })
            .collect();
        drop(stamps);
        if let Some(path) = named.or(restamped.first().copied()) {
            tracing::info!(file = %path.display(), "changed: reloading");
            let gateway = watched.clone();
            runtime.spawn(async move {
                let _ = gateway.reload().await;
            });
        }
    };
    let mut debouncer = new_debouncer(DEBOUNCE, None, on_events)
        .map_err(|source| WatchError { dir: PathBuf::new(), source })?;
    let files = gateway.files();
    let dirs: BTreeSet<PathBuf> =
        files.iter().filter_map(|f| canonical(f)?.parent().map(PathBuf::from)).collect();
    for dir in dirs {
        debouncer
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError { dir: dir.clone(), source })?;
    }
    Ok(Watch { _debouncer: debouncer })
}

/// `file` with its directory made canonical (the file itself may be missing for a moment, in
/// the middle of a deploy): how the watcher names the paths of its events.
fn canonical(file: &Path) -> Option<PathBuf> {
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(file.file_name()?))
}
