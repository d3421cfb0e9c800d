//! The judge prompt: a user-editable text file (`configs/judges/*.txt`) with the placeholders
//! `{question}`, `{gold}` and `{answer}` (all required) and `{document}` (optional).

use std::path::{Path, PathBuf};

use crate::error::{JudgeError, Result};
use crate::verdict::JudgeItem;

/// A loaded judge prompt.
#[derive(Debug, Clone)]
pub struct JudgePrompt {
    /// The file it came from.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

impl JudgePrompt {
    /// Reads and checks a prompt file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| JudgeError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_text(path, text)
    }

    /// Checks a prompt's text.
    pub fn from_text(path: &Path, text: String) -> Result<Self> {
        for p in ["{question}", "{gold}", "{answer}"] {
            if !text.contains(p) {
                return Err(JudgeError::MissingPlaceholder {
                    path: path.to_path_buf(),
                    placeholder: p.into(),
                });
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            text,
        })
    }

    /// The prompt for one item.
    pub fn render(&self, item: &JudgeItem) -> String {
        self.text
            .replace("{question}", &item.question)
            .replace("{gold}", &item.gold)
            .replace("{answer}", item.answer.as_deref().unwrap_or(""))
            .replace("{document}", item.document.as_deref().unwrap_or(""))
    }
}
