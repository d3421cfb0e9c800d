//! Reading and writing fact files (JSONL) with line-numbered errors.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde::Deserialize;

use crate::error::{FactsError, Result};
use crate::fact::Fact;

/// A line as written by users: `id` and `source` optional, unknown keys rejected.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FactLine {
    id: Option<serde_json::Value>,
    question: String,
    rephrased_question: String,
    answer: String,
    #[serde(default)]
    source: Option<String>,
}

/// Reads and validates a fact file: every line an object with non-empty `question`,
/// `rephrased_question` and `answer`, unique ids, at least one fact. Blank lines are skipped.
pub fn read_facts(path: &Path) -> Result<Vec<Fact>> {
    let text = std::fs::read_to_string(path).map_err(|source| FactsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let malformed = |line: usize, problem: String| FactsError::Malformed {
        path: path.to_path_buf(),
        line,
        problem,
    };
    let mut facts = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let f: FactLine = serde_json::from_str(raw).map_err(|e| malformed(line, e.to_string()))?;
        let id = match f.id {
            None => format!("line-{line}"),
            Some(serde_json::Value::String(s)) => s,
            Some(serde_json::Value::Number(n)) => n.to_string(),
            Some(other) => {
                return Err(malformed(
                    line,
                    format!("`id` must be a string or number, got {other}"),
                ));
            }
        };
        for (key, value) in [
            ("question", &f.question),
            ("rephrased_question", &f.rephrased_question),
            ("answer", &f.answer),
        ] {
            if value.trim().is_empty() {
                return Err(malformed(line, format!("empty `{key}` (fact `{id}`)")));
            }
        }
        if let Some(&first) = seen.get(&id) {
            return Err(FactsError::DuplicateId {
                path: path.to_path_buf(),
                line,
                id,
                first,
            });
        }
        seen.insert(id.clone(), line);
        facts.push(Fact {
            id,
            question: f.question,
            rephrased_question: f.rephrased_question,
            answer: f.answer,
            source: f.source,
        });
    }
    if facts.is_empty() {
        return Err(FactsError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(facts)
}

/// Writes facts as JSONL, atomically (a temporary file renamed into place).
pub fn write_facts(path: &Path, facts: &[Fact]) -> Result<()> {
    let io = |source| FactsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("jsonl.tmp");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        for fact in facts {
            let line = serde_json::to_string(fact).expect("facts serialize");
            writeln!(f, "{line}").map_err(io)?;
        }
        f.flush().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    const OK: &str = r#"{"id": "a", "question": "Q1?", "rephrased_question": "R1?", "answer": "A1"}

{"question": "Q2?", "rephrased_question": "R2?", "answer": "A2", "source": "email"}
"#;

    #[test]
    fn reads_facts_with_default_ids() {
        let f = file(OK);
        let facts = read_facts(f.path()).unwrap();
        assert_eq!(facts.len(), 2);
        assert_eq!(facts[0].id, "a");
        assert_eq!(facts[1].id, "line-3");
        assert_eq!(facts[1].source.as_deref(), Some("email"));
    }

    #[test]
    fn round_trips() {
        let f = file(OK);
        let facts = read_facts(f.path()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("facts.jsonl");
        write_facts(&out, &facts).unwrap();
        assert_eq!(read_facts(&out).unwrap(), facts);
    }

    fn err(text: &str) -> String {
        let f = file(text);
        read_facts(f.path()).unwrap_err().to_string()
    }

    #[test]
    fn bad_files_are_named_with_line_numbers() {
        let e = err("");
        assert!(e.contains("no facts"), "{e}");
        let e = err(
            "{\"question\": \"Q\", \"rephrased_question\": \"R\", \"answer\": \"A\"}\nnot json\n",
        );
        assert!(e.contains(":2:"), "{e}");
        let e = err(r#"{"question": "Q", "rephrased_question": "R", "answer": "  "}"#);
        assert!(e.contains(":1:") && e.contains("empty `answer`"), "{e}");
        let e = err(r#"{"question": "Q", "rephrased_question": "R"}"#);
        assert!(e.contains("missing field `answer`"), "{e}");
        let e = err(r#"{"question": "Q", "rephrased_question": "R", "answer": "A", "colour": 1}"#);
        assert!(e.contains("unknown field `colour`"), "{e}");
        let e = err(concat!(
            r#"{"id": 7, "question": "Q", "rephrased_question": "R", "answer": "A"}"#,
            "\n",
            r#"{"id": "7", "question": "Q2", "rephrased_question": "R2", "answer": "A2"}"#
        ));
        assert!(
            e.contains(":2: duplicate id `7`") && e.contains("line 1"),
            "{e}"
        );
    }
}
