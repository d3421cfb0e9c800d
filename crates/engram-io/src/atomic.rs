//! Atomic file and directory writes: content goes to a temporary sibling that is renamed into
//! place, so an interrupted run never leaves a half-written file under the final name.
//!
//! Several processes may write into one directory (sweeps sharing a results directory, on NFS
//! or Lustre too): each temporary name is unique to its process and write, so no writer can
//! rename another's half-written file into place; the file is synced before the rename and its
//! directory after it, so a crash of the machine keeps either the old file or the new one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Temporary names made by this process.
static TEMPORARIES: AtomicUsize = AtomicUsize::new(0);

/// A sibling of `path` no other process or write uses: `<name>.<what>.<host>-<pid>-<t>-<n>`.
/// The host too, since tasks on several machines, or in containers whose pids start over,
/// share result directories; and `t`, this process's start in nanoseconds, since a pid comes
/// back in a later process, which must not meet the leftover of an earlier one killed
/// mid-write.
pub fn unique_sibling(path: &Path, what: &str) -> PathBuf {
    static ME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let me = ME.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        format!("{}-{}-{started:x}", crate::hostname(), std::process::id())
    });
    let n = TEMPORARIES.fetch_add(1, Ordering::SeqCst);
    sibling(path, &format!(".{what}.{me}-{n}"))
}

/// Syncs the directory holding `path`, so that a rename into it survives a crash. Best effort:
/// filesystems that cannot sync a directory (some FUSE mounts) are not an error.
fn sync_parent(path: &Path) {
    // A bare file name's directory is the working directory.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    sync_dir(dir);
}

/// Syncs directory `dir`'s entries (best effort, as [`sync_parent`]).
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes `bytes` to `path` atomically: written and synced to a unique temporary sibling
/// ([`unique_sibling`]), renamed into place, the directory synced.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), AtomicError> {
    let tmp = unique_sibling(path, "tmp");
    let written = (|| {
        // Never another writer's file, should a name repeat after all.
        let mut f = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(at(&tmp)(e));
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(at(path)(e));
    }
    sync_parent(path);
    Ok(())
}

/// Writes `items` as JSON Lines (one value a line) to `path`, atomically ([`write_file`]).
pub fn write_jsonl<T: serde::Serialize>(
    path: &Path,
    items: impl IntoIterator<Item = T>,
) -> Result<(), AtomicError> {
    let mut out = Vec::new();
    for it in items {
        serde_json::to_writer(&mut out, &it).expect("JSON lines serialize");
        out.push(b'\n');
    }
    write_file(path, &out)
}

/// Replaces directory `dst` by `src` (a fully written temporary directory, whose files the
/// caller has synced): `src`'s entries are synced, then it is renamed into place and the parent
/// synced. An existing `dst` is first renamed aside (a [`unique_sibling`]: `<dst>.old.…`) and put back if `src`
/// cannot take its place; once `src` is in place, removing the old copy is best effort (a
/// leftover is no failure of the replacement).
pub fn replace_dir(src: &Path, dst: &Path) -> Result<(), AtomicError> {
    sync_dir(src);
    if dst.exists() {
        let old = unique_sibling(dst, "old");
        std::fs::rename(dst, &old).map_err(at(dst))?;
        if let Err(e) = std::fs::rename(src, dst) {
            let _ = std::fs::rename(&old, dst);
            return Err(at(dst)(e));
        }
        sync_parent(dst);
        let _ = std::fs::remove_dir_all(&old);
        Ok(())
    } else {
        std::fs::rename(src, dst).map_err(at(dst))?;
        sync_parent(dst);
        Ok(())
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
        let names = |d: &Path| -> Vec<String> {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(tmp.path()), ["record.json"], "no temporary left");

        let dst = tmp.path().join("adapter");
        for text in ["old", "new"] {
            let src = tmp.path().join("adapter.partial");
            std::fs::create_dir_all(&src).unwrap();
            std::fs::write(src.join("a"), text).unwrap();
            replace_dir(&src, &dst).unwrap();
        }
        assert_eq!(std::fs::read_to_string(dst.join("a")).unwrap(), "new");
        assert_eq!(names(tmp.path()), ["adapter", "record.json"]);

        // A replacement that cannot take the old one's place leaves the old one where it was.
        let e = replace_dir(&tmp.path().join("never-written"), &dst).unwrap_err();
        assert!(e.to_string().contains("adapter"), "{e}");
        assert_eq!(std::fs::read_to_string(dst.join("a")).unwrap(), "new");
        assert_eq!(names(tmp.path()), ["adapter", "record.json"]);

        let e = write_file(&tmp.path().join("no/such/dir/x"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/dir/x.tmp."), "{e}");
    }

    #[test]
    fn concurrent_writers_never_publish_a_half_written_file() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("table.md");
        let texts: Vec<Vec<u8>> = (0..4u8).map(|i| vec![b'a' + i; 1 << 16]).collect();
        std::thread::scope(|s| {
            for t in &texts {
                let f = &f;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_file(f, t).unwrap();
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..200 {
                    if let Ok(b) = std::fs::read(&f) {
                        assert!(
                            texts.contains(&b),
                            "a torn or mixed file of {} bytes",
                            b.len()
                        );
                    }
                }
            });
        });
        assert!(texts.contains(&std::fs::read(&f).unwrap()));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }
}
