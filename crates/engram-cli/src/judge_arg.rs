//! A `--judge` value of the commands that judge answers (`qa generate`, `rag-bench --reader`):
//! `exact-match`, `token-f1` or `gold-recall` (offline, default thresholds), or a preset file
//! (`configs/judges/*.toml`) whose relative paths start at its directory.

use std::path::{Path, PathBuf};

use anyhow::Result;
use engram_judge::JudgePreset;
use engram_judge::{DEFAULT_F1_THRESHOLD, DEFAULT_RECALL_THRESHOLD};

/// The preset `value` names and the directory its relative paths start from.
pub fn judge_preset(value: &str) -> Result<(JudgePreset, PathBuf)> {
    let here = PathBuf::from(".");
    Ok(match value {
        "exact-match" => (JudgePreset::ExactMatch, here),
        "token-f1" => (
            JudgePreset::TokenF1 {
                threshold: DEFAULT_F1_THRESHOLD,
            },
            here,
        ),
        "gold-recall" => (
            JudgePreset::GoldRecall {
                threshold: DEFAULT_RECALL_THRESHOLD,
            },
            here,
        ),
        file => preset_file(Path::new(file))?,
    })
}

/// The judge preset in the file `path` and the directory its relative paths start from (the
/// file's own).
pub fn preset_file(path: &Path) -> Result<(JudgePreset, PathBuf)> {
    Ok((
        engram_experiments::parse_preset::<JudgePreset>(path)?,
        path.parent().unwrap_or(Path::new(".")).to_path_buf(),
    ))
}
