//! Atomic file and directory writes: content goes to a temporary sibling that is renamed into
//! place, so an interrupted run never leaves a half-written file under the final name.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{LoraError, Result};

/// A sibling path with `suffix` appended to the file name.
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = sibling(path, ".tmp");
    {
        let mut f = std::fs::File::create(&tmp).map_err(LoraError::io(&tmp))?;
        f.write_all(bytes).map_err(LoraError::io(&tmp))?;
        f.sync_all().map_err(LoraError::io(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(LoraError::io(path))
}

/// Replaces directory `dst` by `src` (a fully written temporary directory).
pub fn replace_dir(src: &Path, dst: &Path) -> Result<()> {
    if dst.exists() {
        let old = sibling(dst, ".old");
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(LoraError::io(&old))?;
        }
        std::fs::rename(dst, &old).map_err(LoraError::io(dst))?;
        std::fs::rename(src, dst).map_err(LoraError::io(dst))?;
        std::fs::remove_dir_all(&old).map_err(LoraError::io(&old))
    } else {
        std::fs::rename(src, dst).map_err(LoraError::io(dst))
    }
}
