//! The persistent judge cache: one JSONL line per judged prompt, keyed by
//! `sha256(judge model + prompt)`, appended (and flushed) as each verdict arrives, so that an
//! interrupted run keeps what it got and a rerun never asks the same question twice. Corrupt
//! lines (a crash mid-write) are skipped and counted, never used.
//!
//! The cache is a file, or — where many processes judge into one results directory, on NFS
//! where appends from several machines are not atomic — a directory: every `*.jsonl` in it is
//! read, and each process appends only to a file of its own (`<host>-<pid>-<n>.jsonl`). A file
//! `<dir>.jsonl` beside the directory (the single-file cache of earlier runs) is read too.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{JudgeError, Result};

/// One cached judgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// `sha256(model + "\n" + prompt)`.
    pub key: String,
    /// The judge's raw output.
    pub raw: String,
}

/// The cache file, loaded into memory and appended to.
pub struct JudgeCache {
    /// The file.
    pub path: PathBuf,
    entries: Mutex<HashMap<String, String>>,
    file: Mutex<std::fs::File>,
    /// Lines that could not be read when the cache was opened.
    pub corrupt_lines: usize,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JudgeError + '_ {
    move |source| JudgeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// This process's own file in a shared cache directory: `<host>-<pid>-<n>.jsonl`.
fn own_file(dir: &Path) -> PathBuf {
    static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let host = engram_io::hostname();
    dir.join(format!("{host}-{}-{n}.jsonl", std::process::id()))
}

/// The cache key of a prompt for a judge model.
pub fn cache_key(model: &str, prompt: &str) -> String {
    let mut h = Sha256::new();
    h.update(model.as_bytes());
    h.update(b"\n");
    h.update(prompt.as_bytes());
    hex(&h.finalize())
}

/// `bytes` as lower-case hex digits.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl JudgeCache {
    /// Opens (or creates) the single-file cache at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        Self::load(path, &[path.to_path_buf()])
    }

    /// Opens (or creates) the cache directory `dir`, shared by many writers (module docs).
    pub fn open_shared(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut sources = vec![dir.with_extension("jsonl")];
        for e in std::fs::read_dir(dir).map_err(io(dir))? {
            let p = e.map_err(io(dir))?.path();
            if p.extension().is_some_and(|x| x == "jsonl") {
                sources.push(p);
            }
        }
        let own = own_file(dir);
        Self::load(&own, &sources)
    }

    /// Reads every existing file of `sources`, appends to `path`.
    fn load(path: &Path, sources: &[PathBuf]) -> Result<Self> {
        let mut entries = HashMap::new();
        let mut corrupt_lines = 0;
        for src in sources.iter().filter(|p| p.is_file()) {
            // Bytes, not text: a write cut off inside a multi-byte character leaves the file
            // invalid UTF-8, and only that line may be lost for it.
            let bytes = std::fs::read(src).map_err(io(src))?;
            let lines = bytes.split(|&b| b == b'\n');
            for line in lines.filter(|l| !l.trim_ascii().is_empty()) {
                match serde_json::from_slice::<CacheEntry>(line) {
                    Ok(e) => {
                        entries.insert(e.key, e.raw);
                    }
                    Err(_) => corrupt_lines += 1,
                }
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io(path))?;
        Ok(Self {
            path: path.to_path_buf(),
            entries: Mutex::new(entries),
            file: Mutex::new(file),
            corrupt_lines,
        })
    }

    /// The raw output cached for `key`.
    pub fn get(&self, key: &str) -> Option<String> {
        self.entries.lock().expect("cache lock").get(key).cloned()
    }

    /// Records a judgement (appended to the file at once).
    pub fn put(&self, key: &str, raw: &str) -> Result<()> {
        let line = serde_json::to_string(&CacheEntry {
            key: key.to_string(),
            raw: raw.to_string(),
        })
        .expect("json");
        {
            let mut f = self.file.lock().expect("cache file lock");
            // A previous crash may have left a partial line: start on a fresh one. One write
            // per entry, so appends of several processes to one local file never interleave.
            f.write_all(format!("\n{line}\n").as_bytes())
                .and_then(|_| f.flush())
                .map_err(|source| JudgeError::Io {
                    path: self.path.clone(),
                    source,
                })?;
        }
        self.entries
            .lock()
            .expect("cache lock")
            .insert(key.to_string(), raw.to_string());
        Ok(())
    }

    /// Number of cached judgements.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("cache lock").len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_cache_reads_every_writer_and_writes_its_own_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("judge-cache");
        // The single-file cache of an earlier run, beside the directory.
        let legacy = JudgeCache::open(&dir.with_extension("jsonl")).unwrap();
        legacy.put("old", "VERDICT: CORRECT").unwrap();
        let (a, b) = (
            JudgeCache::open_shared(&dir).unwrap(),
            JudgeCache::open_shared(&dir).unwrap(),
        );
        assert_ne!(a.path, b.path, "each writer appends to its own file");
        a.put("ka", "from a").unwrap();
        b.put("kb", "from b").unwrap();
        let c = JudgeCache::open_shared(&dir).unwrap();
        assert_eq!(c.get("ka").as_deref(), Some("from a"));
        assert_eq!(c.get("kb").as_deref(), Some("from b"));
        assert_eq!(c.get("old").as_deref(), Some("VERDICT: CORRECT"));
        assert_eq!((c.len(), c.corrupt_lines), (3, 0));
    }

    #[test]
    fn a_line_cut_inside_a_character_is_skipped_and_the_rest_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("judge-cache.jsonl");
        let cache = JudgeCache::open(&path).unwrap();
        cache.put("before", "Zürich is right").unwrap();
        drop(cache);
        // A write cut off after the first byte of "ü" (0xC3 0xBC): the file is no longer UTF-8.
        let cut = br#"{"key":"cut","raw":"Z"#;
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"\n");
        bytes.extend_from_slice(cut);
        bytes.push(0xC3);
        std::fs::write(&path, &bytes).unwrap();
        assert!(String::from_utf8(bytes).is_err());
        let cache = JudgeCache::open(&path).unwrap();
        assert_eq!(cache.corrupt_lines, 1);
        assert_eq!(cache.get("before").as_deref(), Some("Zürich is right"));
        assert_eq!(cache.get("cut"), None);
        // And it appends on a fresh line, so the next open reads what this one adds.
        cache.put("after", "ok").unwrap();
        drop(cache);
        let cache = JudgeCache::open(&path).unwrap();
        assert_eq!((cache.len(), cache.corrupt_lines), (2, 1));
    }
}
