//! Temporary directories, one per test and process, removed when dropped.

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A fresh directory under the system's temporary directory, named for the test and the
/// process (so parallel tests and runs never share one), removed with what it holds when
/// dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// `causeway-NAME-PID`, emptied if a killed run left it behind.
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("causeway-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("making {}: {e}", path.display()));
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside it.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }
}

impl Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<OsStr> for TempDir {
    fn as_ref(&self) -> &OsStr {
        self.path.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_dir_starts_empty_and_is_removed_with_its_files_on_drop() {
        let dir = TempDir::new("testkit-temp");
        assert_eq!(
            std::fs::read_dir(dir.path()).map(|d| d.count()).ok(),
            Some(0)
        );
        std::fs::write(dir.join("a"), b"x").expect("a file");
        let kept = dir.path().to_path_buf();
        drop(dir);
        assert!(!kept.exists());
    }
}
