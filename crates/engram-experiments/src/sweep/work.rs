//! The cells' working directories, `results/<exp>/work/<cell>/`: each stamped with the
//! configuration hash it belongs to (emptied when another configuration takes it over), holding
//! LoRA's per-epoch checkpoints and adapter and the answers saved before judging.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::record::MethodMetrics;

/// Answers saved before judging (`work/<cell>/answers.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedAnswers {
    /// The configuration they were made with.
    pub config_hash: String,
    /// `None`: the method was NA (the reason in `na`).
    pub answers: Option<Vec<String>>,
    /// Why the method does not apply.
    pub na: Option<String>,
    /// The method's figures.
    pub metrics: MethodMetrics,
    /// Seconds of training.
    pub train_s: f64,
    /// Seconds of answering.
    pub answer_s: f64,
}

const SAVED: &str = "answers.json";

impl SavedAnswers {
    /// The answers saved in `work` for configuration `hash`, if any.
    pub fn read(work: &Path, hash: &str) -> Option<Self> {
        std::fs::read(work.join(SAVED))
            .ok()
            .and_then(|b| serde_json::from_slice::<Self>(&b).ok())
            .filter(|s| s.config_hash == hash)
    }

    /// Saves them in `work` (atomically).
    pub fn write(&self, work: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self)?;
        Ok(engram_io::write_file(&work.join(SAVED), &bytes)?)
    }
}

/// Where the cells' working directories are, and whether trained adapters stay in them.
pub struct WorkDirs {
    /// `results/<exp>/work`.
    pub root: PathBuf,
    /// `[training] keep_adapters`.
    pub keep_adapters: bool,
}

impl WorkDirs {
    /// The working directory of cell `id`.
    pub fn of(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// The cell's working directory, emptied if it belongs to another configuration.
    pub fn prepare(&self, id: &str, hash: &str) -> Result<PathBuf> {
        let dir = self.of(id);
        let stamp = dir.join("config_hash");
        if dir.exists() && std::fs::read_to_string(&stamp).ok().as_deref() != Some(hash) {
            std::fs::remove_dir_all(&dir).with_context(|| dir.display().to_string())?;
        }
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        engram_io::write_file(&stamp, hash.as_bytes())?;
        Ok(dir)
    }

    /// After a record is written: drop optimizer checkpoints (and the adapter unless kept).
    pub fn clean(&self, id: &str) {
        let dir = self.of(id);
        let _ = std::fs::remove_dir_all(dir.join("checkpoints"));
        if !self.keep_adapters || !dir.join("adapter_config.json").exists() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
