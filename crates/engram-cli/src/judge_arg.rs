//! A `--judge` value of the commands that judge answers (`qa generate`, `rag-bench --reader`):
//! `exact-match`, `token-f1` or `gold-recall` (offline, default thresholds), or a preset file
//! (`configs/judges/*.toml`) whose relative paths start at its directory.

use std::path::{Path, PathBuf};

use anyhow::Result;
use engram_judge::JudgePreset;

/// The preset `value` names and the directory its relative paths start from.
pub fn judge_preset(value: &str) -> Result<(JudgePreset, PathBuf)> {
    match JudgePreset::offline_defaults()
        .into_iter()
        .find(|(name, _)| *name == value)
    {
        Some((_, offline)) => Ok((offline, PathBuf::from("."))),
        None => preset_file(Path::new(value)),
    }
}

/// The judge preset in the file `path` and the directory its relative paths start from (the
/// file's own).
pub fn preset_file(path: &Path) -> Result<(JudgePreset, PathBuf)> {
    Ok((
        engram_experiments::parse_preset::<JudgePreset>(path)?,
        path.parent().unwrap_or(Path::new(".")).to_path_buf(),
    ))
}
