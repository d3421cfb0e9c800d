//! The judge prompt: a user-editable text file (`configs/judges/*.txt`) with the placeholders
//! `{question}`, `{gold}` and `{answer}` (all required) and `{document}` (optional).
//!
//! The whole file is the user message, unless it starts with a line `### system`: then the
//! lines up to a line `### user` are the system message and the rest is the user message
//! (small judges follow a grading instruction better as a system message).

use std::path::{Path, PathBuf};

use crate::error::{JudgeError, Result};
use crate::protocol::Message;
use crate::verdict::JudgeItem;

/// The line that opens a prompt file's system message.
pub const SYSTEM_MARKER: &str = "### system";
/// The line that opens its user message after a system message.
pub const USER_MARKER: &str = "### user";

/// A loaded judge prompt.
#[derive(Debug, Clone)]
pub struct JudgePrompt {
    /// The file it came from.
    pub path: PathBuf,
    /// The system message, if the file has one.
    pub system: Option<String>,
    /// The user message's template.
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

    /// Checks a prompt's text (`path` only names it in errors).
    pub fn from_text(path: &Path, text: String) -> Result<Self> {
        let (system, text) = split_system(path, &text)?;
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
            system,
            text,
        })
    }

    /// The user message for one item.
    pub fn render(&self, item: &JudgeItem) -> String {
        fill(&self.text, item)
    }

    /// The conversation that asks for one item's verdict: the system message (if any), then
    /// the user message.
    pub fn messages(&self, item: &JudgeItem) -> Vec<Message> {
        let mut m = Vec::with_capacity(2);
        if let Some(s) = &self.system {
            m.push(Message::new("system", fill(s, item)));
        }
        m.push(Message::new("user", self.render(item)));
        m
    }
}

fn fill(template: &str, item: &JudgeItem) -> String {
    template
        .replace("{question}", &item.question)
        .replace("{gold}", &item.gold)
        .replace("{answer}", item.answer.as_deref().unwrap_or(""))
        .replace("{document}", item.document.as_deref().unwrap_or(""))
}

/// `(system, user)` of a prompt file's text (`path` only names it in errors): the system
/// section when the text opens with [`SYSTEM_MARKER`], and the user message.
pub fn split_system(path: &Path, text: &str) -> Result<(Option<String>, String)> {
    let body = text.trim_start_matches(['\n', '\r']);
    let Some(rest) = body.strip_prefix(SYSTEM_MARKER) else {
        return Ok((None, text.to_string()));
    };
    let marker = rest
        .match_indices(USER_MARKER)
        .find(|(i, _)| rest[..*i].ends_with('\n'))
        .map(|(i, _)| i);
    let Some(i) = marker else {
        return Err(JudgeError::Bad(format!(
            "{}: the prompt opens a system message (`{SYSTEM_MARKER}`) but has no `{USER_MARKER}` line after it",
            path.display()
        )));
    };
    let system = rest[..i].trim().to_string();
    let user = rest[i + USER_MARKER.len()..].trim().to_string() + "\n";
    Ok(((!system.is_empty()).then_some(system), user))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item() -> JudgeItem {
        JudgeItem {
            id: "1".into(),
            question: "Q?".into(),
            gold: "G".into(),
            answer: Some("A".into()),
            document: None,
        }
    }

    #[test]
    fn a_system_section_becomes_the_system_message() {
        let p = Path::new("p.txt");
        let plain = JudgePrompt::from_text(p, "{question} {gold} {answer}".into()).unwrap();
        assert_eq!(
            plain.messages(&item()),
            vec![Message::new("user", "Q? G A")]
        );
        let text = "### system\nYou grade.\n\n### user\nQuestion: {question}\nGold: {gold}\nCandidate: {answer}\n";
        let both = JudgePrompt::from_text(p, text.into()).unwrap();
        assert_eq!(
            both.messages(&item()),
            vec![
                Message::new("system", "You grade."),
                Message::new("user", "Question: Q?\nGold: G\nCandidate: A\n"),
            ]
        );
        let e = JudgePrompt::from_text(
            p,
            "### system\nYou grade. {question} {gold} {answer}".into(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("p.txt") && e.contains("### user"), "{e}");
        // The placeholders must be in the user message.
        let e = JudgePrompt::from_text(
            p,
            "### system\n{question}\n### user\n{gold} {answer}".into(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("{question}"), "{e}");
    }
}
