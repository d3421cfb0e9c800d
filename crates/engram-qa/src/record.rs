//! What QA generation records about every pair it tried: each round's pair and check outcomes,
//! each rephrasing tried, and whether the pair was kept or why it was dropped. One line each in
//! `checks.jsonl`, in document order, the same bytes on every rerun.

use serde::{Deserialize, Serialize};

/// A check's name in records (the order they run in).
pub mod check {
    /// The LLM, shown the question and the pair's document among similar ones, picks its own.
    pub const SPECIFIC: &str = "specific";
    /// Independent answers from the document all match the gold answer.
    pub const OBJECTIVE: &str = "objective";
    /// The generator, without the document, does not answer correctly.
    pub const GROUNDED: &str = "grounded";
    /// The model the table will train, without the document, does not answer correctly.
    pub const GROUNDED_TARGET: &str = "grounded-target";
    /// The rubric passes the pair.
    pub const QUALITY: &str = "quality";
}

/// Why a pair was dropped (beside the names in [`check`], each the check that failed last).
pub mod reason {
    /// No round gave a usable pair (no JSON object with a question and an answer).
    pub const MALFORMED: &str = "malformed";
    /// No rephrasing was answered from the document with the gold answer.
    pub const REPHRASE_UNVERIFIED: &str = "rephrase-unverified";
    /// The same question (case and spacing aside) as a pair kept before it.
    pub const DUPLICATE: &str = "duplicate-question";
}

/// One check on one round's pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckOutcome {
    /// [`check`]'s name.
    pub check: String,
    /// Whether the pair passed.
    pub passed: bool,
    /// What was seen (the pick, the answers judged, the grade's reason).
    pub detail: String,
}

/// One round: the pair the LLM wrote (or why there is none) and the checks it went through
/// (up to the first that failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// The question, when the reply held a pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The answer, when the reply held a pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Why the reply held no pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub malformed: Option<String>,
    /// The checks run, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckOutcome>,
}

impl Round {
    /// The first failed check, if any.
    pub fn failed(&self) -> Option<&CheckOutcome> {
        self.checks.iter().find(|c| !c.passed)
    }
}

/// One rephrasing tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RephraseTry {
    /// The rephrased question (`None`: the reply held none).
    pub question: Option<String>,
    /// The answer to it from the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Whether the judge matched that answer with the gold answer.
    pub verified: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Kept or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Written to the fact file.
    Kept,
    /// Left out, with a reason.
    Dropped,
}

/// Everything about one pair slot (document × question index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRecord {
    /// The fact id: `<document id>/q<index>`.
    pub id: String,
    /// The source document's id.
    pub document: String,
    /// Kept or dropped.
    pub status: Status,
    /// Why it was dropped: a check's name or a [`reason`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The final question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The final answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The verified rephrasing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rephrased_question: Option<String>,
    /// Whether the document was cut to `max_document_chars` in the prompts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Generation and refinement rounds, in order.
    pub rounds: Vec<Round>,
    /// Rephrasings tried, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rephrasings: Vec<RephraseTry>,
}

impl PairRecord {
    /// Whether the pair is kept.
    pub fn kept(&self) -> bool {
        self.status == Status::Kept
    }

    /// Drops the pair for `reason`.
    pub fn drop_for(&mut self, reason: &str) {
        self.status = Status::Dropped;
        self.reason = Some(reason.to_string());
    }
}
