//! The persistent judge cache: one JSONL line per judged prompt, keyed by
//! `sha256(judge model + prompt)`, appended (and flushed) as each verdict arrives, so that an
//! interrupted run keeps what it got and a rerun never asks the same question twice. Corrupt
//! lines (a crash mid-write) are skipped and counted, never used.

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

/// The cache key of a prompt for a judge model.
pub fn cache_key(model: &str, prompt: &str) -> String {
    let mut h = Sha256::new();
    h.update(model.as_bytes());
    h.update(b"\n");
    h.update(prompt.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl JudgeCache {
    /// Opens (or creates) the cache at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let io = |source| JudgeError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut entries = HashMap::new();
        let mut corrupt_lines = 0;
        if path.exists() {
            let text = std::fs::read_to_string(path).map_err(io)?;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<CacheEntry>(line) {
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
            .map_err(io)?;
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
            // A previous crash may have left a partial line: start on a fresh one.
            writeln!(f, "\n{line}")
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
