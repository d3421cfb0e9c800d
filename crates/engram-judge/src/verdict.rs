//! What a judge sees and says.

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// One answer to judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeItem {
    /// The fact or question id.
    pub id: String,
    /// The question asked.
    pub question: String,
    /// The gold answer.
    pub gold: String,
    /// The candidate answer (`None` when the method was NA).
    pub answer: Option<String>,
    /// The source document, when the judge prompt uses it.
    #[serde(default)]
    pub document: Option<String>,
}

/// A judgement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The item's id.
    pub id: String,
    /// Correct, incorrect, or `None` (NA answer, or an output that could not be parsed).
    pub correct: Option<bool>,
    /// Which judge (e.g. `offline:exact-match`, `openai:<model>`).
    pub judge: String,
    /// The judge's raw output (the score for offline judges).
    pub raw: String,
    /// The raw reply to the follow-up turn, asked when `raw` held no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<String>,
    /// The judge's reasoning, when it gave one.
    pub rationale: Option<String>,
    /// Served from the cache.
    pub cached: bool,
    /// Why there is no verdict, if there is none.
    pub error: Option<String>,
}

impl Verdict {
    /// No verdict for an item without an answer (the method was NA).
    pub fn na(id: &str, judge: &str) -> Self {
        Self {
            id: id.to_string(),
            correct: None,
            judge: judge.to_string(),
            raw: String::new(),
            follow_up: None,
            rationale: None,
            cached: false,
            error: Some("no answer (NA)".into()),
        }
    }
}

/// Anything that judges a batch of answers (shared across threads: QA generation checks
/// several documents at once).
pub trait Judge: Send + Sync {
    /// The name written into every verdict.
    fn name(&self) -> String;
    /// Everything about this judge that can change a verdict, in one line: what a record of
    /// work judged by it (a QA run's facts) compares to tell whether that work is still this
    /// judge's. By default the name, which says it all for the offline judges (their rule and
    /// threshold).
    fn fingerprint(&self) -> String {
        self.name()
    }
    /// Judges `items`, one verdict each, in order.
    fn judge(&self, items: &[JudgeItem]) -> Result<Vec<Verdict>>;
    /// Things worth telling the user about this judge now (a cache with corrupt lines when it
    /// opens, a server that rejected the structured format while judging); each note is handed
    /// out once. None by default.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}
