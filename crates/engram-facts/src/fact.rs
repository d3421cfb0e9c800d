//! One question → answer fact.

use serde::{Deserialize, Serialize};

/// A fact: the original question (asked at evaluation), a rephrasing (used for training) and
/// the gold answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    /// Unique id (EnronQA: `split/path/index`).
    pub id: String,
    /// The original question.
    pub question: String,
    /// The rephrased question.
    pub rephrased_question: String,
    /// The gold answer.
    pub answer: String,
    /// The source document, when known (the email for EnronQA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Which of a fact's two questions is asked: the original (what evaluation asks, EnronQA §6) or
/// the rephrased one (what LoRA trains on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Asked {
    /// The original question (evaluation, EnronQA §6).
    Original,
    /// The rephrased question (the one LoRA trains on).
    Rephrased,
}

impl Fact {
    /// The question `which` names.
    pub fn asked(&self, which: Asked) -> &str {
        match which {
            Asked::Original => &self.question,
            Asked::Rephrased => &self.rephrased_question,
        }
    }
}
