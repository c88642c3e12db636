//! Files the server rewrites whole (its checkpoints and snapshots).

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` so that a crash leaves the old file or the new one, whole.
pub(crate) fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp: PathBuf = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    // The rename itself made durable (a bare file name's directory is the current one).
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()?;
    Ok(())
}
