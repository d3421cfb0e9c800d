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
