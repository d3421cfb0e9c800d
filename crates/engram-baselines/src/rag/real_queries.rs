//! Real queries for the comparison with generated ones ([`crate::rag::query_compare`]): a JSONL
//! file, one query a line — `{"query": "...", "document": "<corpus id>"}` — where `question` and
//! `text` are read as `query`, `source` as `document` (so an engram fact file of real questions
//! reads too), and the document is optional (a query without one enters only the query–query
//! figures). Blank lines are skipped; anything else that is not such an object is named by line.

use std::path::Path;

use serde::Deserialize;

use crate::error::{BaselineError, Result};

/// A real query.
#[derive(Debug, Clone, PartialEq)]
pub struct RealQuery {
    /// Its id (`id` in the file, else `line-N`).
    pub id: String,
    /// What was asked.
    pub text: String,
    /// The corpus id of the document that answers it, if known.
    pub document: Option<String>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(alias = "question", alias = "text")]
    query: String,
    #[serde(default, alias = "source")]
    document: Option<String>,
}

/// Reads the real queries of `path` (at least one).
pub fn read_real_queries(path: &Path) -> Result<Vec<RealQuery>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BaselineError::Bad(format!("cannot read {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let bad = |problem: String| {
            BaselineError::Bad(format!("{} line {}: {problem}", path.display(), i + 1))
        };
        let l: Line = serde_json::from_str(raw).map_err(|e| bad(e.to_string()))?;
        if l.query.trim().is_empty() {
            return Err(bad("the query is empty".into()));
        }
        let id = match l.id {
            None => format!("line-{}", i + 1),
            Some(serde_json::Value::String(s)) => s,
            Some(other) => other.to_string(),
        };
        out.push(RealQuery {
            id,
            text: l.query,
            document: l.document.filter(|d| !d.is_empty()),
        });
    }
    if out.is_empty() {
        return Err(BaselineError::Bad(format!(
            "{}: no queries in it",
            path.display()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_queries_and_fact_files_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.jsonl");
        std::fs::write(
            &p,
            "{\"query\": \"who signed\", \"document\": \"d1\"}\n\n{\"id\": 7, \"question\": \"when\", \"source\": \"d2\", \"answer\": \"x\"}\n{\"text\": \"what\"}\n",
        )
        .unwrap();
        let q = read_real_queries(&p).unwrap();
        assert_eq!(q.len(), 3);
        assert_eq!(
            (q[0].id.as_str(), q[0].document.as_deref()),
            ("line-1", Some("d1"))
        );
        assert_eq!((q[1].id.as_str(), q[1].text.as_str()), ("7", "when"));
        assert_eq!(q[2].document, None);
        std::fs::write(&p, "{\"query\": \"a\"}\n{\"document\": \"d\"}\n").unwrap();
        let e = read_real_queries(&p).unwrap_err().to_string();
        assert!(e.contains("q.jsonl line 2") && e.contains("query"), "{e}");
        std::fs::write(&p, "\n").unwrap();
        let e = read_real_queries(&p).unwrap_err().to_string();
        assert!(e.contains("no queries"), "{e}");
    }
}
