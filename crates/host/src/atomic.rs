//! Files written whole or not at all: deployed workers' files and pulled modules.

use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to a temporary file beside `path`, then renames it into place: a crash
/// leaves the old file or the new one, never half of one.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = tempfile::NamedTempFile::new_in(path.parent().unwrap_or(Path::new(".")))?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map(drop).map_err(|e| e.error)
}
