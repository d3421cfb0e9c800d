//! The prompts of QA generation: one user-editable text file per stage in a directory
//! (`configs/qa/` by default), each checked for the placeholders its stage fills. A file may
//! open with a `### system` section, as judge prompts do ([`engram_judge::template`]).
//! Placeholders are filled in one pass, so a document that happens to contain `{question}`
//! stays as written.

use std::path::{Path, PathBuf};

use engram_judge::Message;
use engram_judge::split_system;

use crate::error::{QaError, Result};

/// A stage's prompt: its file name and the placeholders it must hold (and may hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// Its name in errors and records.
    pub name: &'static str,
    /// The file in the prompt directory.
    pub file: &'static str,
    /// Placeholders the file must contain.
    pub required: &'static [&'static str],
    /// Placeholders it may contain.
    pub optional: &'static [&'static str],
}

/// Writes a question–answer pair from a document (`{previous}`: questions already kept).
pub const GENERATE: Stage = Stage {
    name: "generate",
    file: "generate.txt",
    required: &["document"],
    optional: &["previous"],
};
/// Picks, among numbered documents, the one that answers a question (specificity).
pub const SPECIFIC: Stage = Stage {
    name: "specific",
    file: "specific.txt",
    required: &["question", "documents"],
    optional: &[],
};
/// Answers a question from a document (objectivity, and the rephrasing check).
pub const ANSWER: Stage = Stage {
    name: "answer",
    file: "answer.txt",
    required: &["document", "question"],
    optional: &[],
};
/// Answers a question without any document (groundedness).
pub const CLOSED_BOOK: Stage = Stage {
    name: "closed-book",
    file: "closed_book.txt",
    required: &["question"],
    optional: &[],
};
/// Grades a pair against a rubric (quality).
pub const QUALITY: Stage = Stage {
    name: "quality",
    file: "quality.txt",
    required: &["document", "question", "answer"],
    optional: &[],
};
/// Rewrites a pair that failed a check, the failure as feedback.
pub const REFINE: Stage = Stage {
    name: "refine",
    file: "refine.txt",
    required: &["document", "question", "answer", "feedback"],
    optional: &[],
};
/// Rephrases a question (`{previous}`: rephrasings already rejected).
pub const REPHRASE: Stage = Stage {
    name: "rephrase",
    file: "rephrase.txt",
    required: &["question"],
    optional: &["previous"],
};

/// One loaded prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// Its stage.
    pub stage: Stage,
    /// The file it came from.
    pub path: PathBuf,
    /// The system message's template, if any.
    pub system: Option<String>,
    /// The user message's template.
    pub user: String,
}

impl Prompt {
    /// Reads and checks `stage`'s file in `dir`.
    pub fn load(dir: &Path, stage: Stage) -> Result<Self> {
        let path = dir.join(stage.file);
        let text = std::fs::read_to_string(&path).map_err(QaError::file(&path))?;
        Self::from_text(&path, stage, &text)
    }

    /// Checks a prompt's text (`path` only names it in errors).
    pub fn from_text(path: &Path, stage: Stage, text: &str) -> Result<Self> {
        let (system, user) = split_system(path, text)?;
        let both = format!("{}\n{user}", system.as_deref().unwrap_or(""));
        for p in stage.required {
            if !both.contains(&format!("{{{p}}}")) {
                return Err(QaError::MissingPlaceholder {
                    path: path.to_path_buf(),
                    stage: stage.name,
                    placeholder: p,
                });
            }
        }
        Ok(Self {
            stage,
            path: path.to_path_buf(),
            system,
            user,
        })
    }

    /// The conversation for these placeholder values (`(name, value)`; placeholders of the
    /// stage without a value become empty).
    pub fn messages(&self, values: &[(&str, &str)]) -> Vec<Message> {
        let names: Vec<&str> = self
            .stage
            .required
            .iter()
            .chain(self.stage.optional)
            .copied()
            .collect();
        let mut m = Vec::with_capacity(2);
        if let Some(s) = &self.system {
            m.push(Message::new("system", fill(s, &names, values)));
        }
        m.push(Message::new("user", fill(&self.user, &names, values)));
        m
    }
}

/// `template` with each `{name}` of `names` replaced by its value (empty without one), in one
/// pass.
fn fill(template: &str, names: &[&str], values: &[(&str, &str)]) -> String {
    let value = |name: &str| {
        values
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(String::new(), |(_, v)| v.to_string())
    };
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after
            .find('}')
            .map(|j| &after[..j])
            .filter(|n| names.contains(n))
        {
            Some(name) => {
                out.push_str(&value(name));
                rest = &after[name.len() + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every stage's prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct QaPrompts {
    /// The directory they came from.
    pub dir: PathBuf,
    /// Writes a pair.
    pub generate: Prompt,
    /// Picks the document that answers a question.
    pub specific: Prompt,
    /// Answers from a document.
    pub answer: Prompt,
    /// Answers without one.
    pub closed_book: Prompt,
    /// Grades a pair.
    pub quality: Prompt,
    /// Rewrites a failed pair.
    pub refine: Prompt,
    /// Rephrases a question.
    pub rephrase: Prompt,
}

impl QaPrompts {
    /// Loads every stage's file from `dir`, naming the first one missing or incomplete.
    pub fn load(dir: &Path) -> Result<Self> {
        Ok(Self {
            dir: dir.to_path_buf(),
            generate: Prompt::load(dir, GENERATE)?,
            specific: Prompt::load(dir, SPECIFIC)?,
            answer: Prompt::load(dir, ANSWER)?,
            closed_book: Prompt::load(dir, CLOSED_BOOK)?,
            quality: Prompt::load(dir, QUALITY)?,
            refine: Prompt::load(dir, REFINE)?,
            rephrase: Prompt::load(dir, REPHRASE)?,
        })
    }

    /// The templates' text, for the settings hash.
    pub fn fingerprint(&self) -> String {
        [
            &self.generate,
            &self.specific,
            &self.answer,
            &self.closed_book,
            &self.quality,
            &self.refine,
            &self.rephrase,
        ]
        .iter()
        .map(|p| format!("{}\n{:?}\n{}\n", p.stage.name, p.system, p.user))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_checked_and_filled_once() {
        let p = Path::new("specific.txt");
        let e = Prompt::from_text(p, SPECIFIC, "Which one answers {question}?")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("specific.txt") && e.contains("{documents}"),
            "{e}"
        );
        let prompt = Prompt::from_text(
            p,
            SPECIFIC,
            "### system\nPick one.\n### user\n{documents}\nQ: {question} {other}",
        )
        .unwrap();
        let m = prompt.messages(&[("question", "Who? {documents}"), ("documents", "[1] a")]);
        assert_eq!(m[0].content, "Pick one.");
        // The value's own `{documents}` stays; an unknown placeholder stays as written.
        assert_eq!(m[1].content, "[1] a\nQ: Who? {documents} {other}\n");
    }
}
