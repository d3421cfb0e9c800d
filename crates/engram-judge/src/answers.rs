//! The answers file — JSONL, one line per question: what `engram answer` writes and `engram
//! judge` reads, defined once here — and the verdicts file the judge writes.

use std::path::Path;

use serde::Serialize;

use crate::error::{JudgeError, Result};
use crate::verdict::{JudgeItem, Verdict};

/// One line of an answers file: an answer, or — where the method does not apply (long context
/// past the window) — `answer` `null` and `na` true; made by [`AnswerLine::answered`] or
/// [`AnswerLine::not_applicable`], so that it is always one or the other.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerLine {
    /// The fact's id.
    id: String,
    /// The method that answered (`lora`, `long-context`, `rag`).
    method: String,
    /// The question asked.
    question: String,
    /// The gold answer.
    gold: String,
    /// The answer, `None` where the method did not apply.
    answer: Option<String>,
    /// Tokens generated.
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<usize>,
    /// Whether the model ended the answer itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<bool>,
    /// Set where the method did not apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    na: Option<bool>,
}

impl AnswerLine {
    /// The line of a question that `method` answered with `answer` (`tokens` generated;
    /// `stopped`: the model ended it itself).
    pub fn answered(
        id: &str,
        method: &str,
        question: &str,
        gold: &str,
        answer: &str,
        tokens: usize,
        stopped: bool,
    ) -> Self {
        Self {
            id: id.into(),
            method: method.into(),
            question: question.into(),
            gold: gold.into(),
            answer: Some(answer.into()),
            tokens: Some(tokens),
            stopped: Some(stopped),
            na: None,
        }
    }

    /// The line of a question `method` does not apply to (long context past the window): no
    /// answer, `na` set.
    pub fn not_applicable(id: &str, method: &str, question: &str, gold: &str) -> Self {
        Self {
            id: id.into(),
            method: method.into(),
            question: question.into(),
            gold: gold.into(),
            answer: None,
            tokens: None,
            stopped: None,
            na: Some(true),
        }
    }
}

/// Writes `lines` to `path` (atomically), one JSON object a line.
pub fn write_answers(path: &Path, lines: &[AnswerLine]) -> Result<()> {
    engram_io::write_jsonl(path, lines).map_err(|e| JudgeError::Io {
        path: e.path,
        source: e.source,
    })
}

/// Writes verdicts as JSONL (one [`Verdict`] a line, in order), atomically.
pub fn write_verdicts(path: &Path, verdicts: &[Verdict]) -> Result<()> {
    engram_io::write_jsonl(path, verdicts).map_err(|e| JudgeError::Io {
        path: e.path,
        source: e.source,
    })
}

/// Reads an answers file as the items to judge (`id`, `question`, `gold` required; `answer`
/// and `document` where present); a line that is not JSON or lacks a field is named.
pub fn read_answers(path: &Path) -> Result<Vec<JudgeItem>> {
    let text = std::fs::read_to_string(path).map_err(|source| JudgeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut items = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = format!("{}:{}", path.display(), i + 1);
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| JudgeError::Bad(format!("{at}: not JSON: {e}")))?;
        let field = |k: &str| -> Result<String> {
            v[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| JudgeError::Bad(format!("{at}: missing `{k}`")))
        };
        items.push(JudgeItem {
            id: field("id")?,
            question: field("question")?,
            gold: field("gold")?,
            answer: v["answer"].as_str().map(str::to_string),
            document: v["document"].as_str().map(str::to_string),
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `engram answer` wrote before this module (keys in this order) reads back, and an
    /// NA line carries no answer.
    #[test]
    fn lines_round_trip_in_the_written_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let lines = vec![
            AnswerLine {
                id: "f1".into(),
                method: "rag".into(),
                question: "Q?".into(),
                gold: "G".into(),
                answer: Some("A".into()),
                tokens: Some(3),
                stopped: Some(true),
                na: None,
            },
            AnswerLine {
                id: "f2".into(),
                method: "long-context".into(),
                question: "Q2?".into(),
                gold: "G2".into(),
                answer: None,
                tokens: None,
                stopped: None,
                na: Some(true),
            },
        ];
        write_answers(&path, &lines).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"id\":\"f1\",\"method\":\"rag\",\"question\":\"Q?\",\"gold\":\"G\",\"answer\":\"A\",\"tokens\":3,\"stopped\":true}\n\
             {\"id\":\"f2\",\"method\":\"long-context\",\"question\":\"Q2?\",\"gold\":\"G2\",\"answer\":null,\"na\":true}\n"
        );
        let items = read_answers(&path).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].answer.as_deref(), Some("A"));
        assert_eq!(items[1].answer, None);
        std::fs::write(&path, "{\"id\":\"x\"}\n").unwrap();
        let err = read_answers(&path).unwrap_err().to_string();
        assert!(err.ends_with("a.jsonl:1: missing `question`"), "{err}");
    }
}
