//! Atomic file and directory writes: content goes to a temporary sibling that is renamed into
//! place, so an interrupted run never leaves a half-written file under the final name.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A write that failed, with the path it failed on.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct AtomicError {
    /// The file or directory.
    pub path: PathBuf,
    /// The OS error.
    pub source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> AtomicError + '_ {
    move |source| AtomicError {
        path: path.to_path_buf(),
        source,
    }
}

/// A sibling path with `suffix` appended to the file name.
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically (written and synced to `path.tmp`, then renamed).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), AtomicError> {
    let tmp = sibling(path, ".tmp");
    {
        let mut f = std::fs::File::create(&tmp).map_err(at(&tmp))?;
        f.write_all(bytes).map_err(at(&tmp))?;
        f.sync_all().map_err(at(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(at(path))
}

/// Replaces directory `dst` by `src` (a fully written temporary directory).
pub fn replace_dir(src: &Path, dst: &Path) -> Result<(), AtomicError> {
    if dst.exists() {
        let old = sibling(dst, ".old");
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(at(&old))?;
        }
        std::fs::rename(dst, &old).map_err(at(dst))?;
        std::fs::rename(src, dst).map_err(at(dst))?;
        std::fs::remove_dir_all(&old).map_err(at(&old))
    } else {
        std::fs::rename(src, dst).map_err(at(dst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_are_replaced_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("record.json");
        write_file(&f, b"one").unwrap();
        write_file(&f, b"two").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        assert!(!sibling(&f, ".tmp").exists());

        let dst = tmp.path().join("adapter");
        for text in ["old", "new"] {
            let src = tmp.path().join("adapter.partial");
            std::fs::create_dir_all(&src).unwrap();
            std::fs::write(src.join("a"), text).unwrap();
            replace_dir(&src, &dst).unwrap();
        }
        assert_eq!(std::fs::read_to_string(dst.join("a")).unwrap(), "new");
        assert!(!sibling(&dst, ".old").exists());

        let e = write_file(&tmp.path().join("no/such/dir/x"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/dir/x.tmp"), "{e}");
    }
}
