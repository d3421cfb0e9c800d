//! The cells of a sweep: every fact count × every method (long context, RAG, one LoRA rank
//! each), with stable ids (`n10-long-context`, `n10-rag`, `n100-lora-r8`) and `--only`
//! selection.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::experiment::Experiment;

/// How the facts reach the model in a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Method {
    /// Every fact in the prompt.
    LongContext,
    /// The top-k retrieved facts in the prompt.
    Rag,
    /// A LoRA adapter of this rank, trained on the facts.
    Lora {
        /// The rank.
        rank: usize,
    },
}

impl Method {
    /// The id part: `long-context`, `rag`, `lora-r8`.
    pub fn slug(&self) -> String {
        match self {
            Method::LongContext => "long-context".into(),
            Method::Rag => "rag".into(),
            Method::Lora { rank } => format!("lora-r{rank}"),
        }
    }

    /// The table's column header: `Long Context`, `RAG`, `LoRA r=8`.
    pub fn header(&self) -> String {
        match self {
            Method::LongContext => "Long Context".into(),
            Method::Rag => "RAG".into(),
            Method::Lora { rank } => format!("LoRA r={rank}"),
        }
    }
}

/// One (fact count, method) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cell {
    /// Number of facts.
    pub facts: usize,
    /// The method.
    pub method: Method,
}

impl Cell {
    /// The cell's id: `n<facts>-<method>`.
    pub fn id(&self) -> String {
        format!("n{}-{}", self.facts, self.method.slug())
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

/// Every cell of `exp`, by fact count, then long context, RAG, and LoRA by rank.
pub fn expand(exp: &Experiment) -> Vec<Cell> {
    let mut sizes = exp.facts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut ranks = exp.methods.lora_ranks.clone();
    ranks.sort_unstable();
    ranks.dedup();
    let mut cells = Vec::new();
    for &facts in &sizes {
        if exp.methods.long_context {
            cells.push(Cell {
                facts,
                method: Method::LongContext,
            });
        }
        if exp.methods.rag {
            cells.push(Cell {
                facts,
                method: Method::Rag,
            });
        }
        for &rank in &ranks {
            cells.push(Cell {
                facts,
                method: Method::Lora { rank },
            });
        }
    }
    cells
}

/// Whether `id` matches a `--only` pattern: the exact id, or a glob with `*` (e.g. `n10-*`,
/// `*-lora-*`).
pub fn matches(pattern: &str, id: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == id;
    }
    let mut rest = id;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// The cells that match any of `patterns` (all cells when there are none).
pub fn select(cells: &[Cell], patterns: &[String]) -> Vec<Cell> {
    if patterns.is_empty() {
        return cells.to_vec();
    }
    cells
        .iter()
        .filter(|c| patterns.iter().any(|p| matches(p, &c.id())))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(matches("n10-rag", "n10-rag"));
        assert!(!matches("n10-rag", "n100-rag"));
        assert!(matches("n10-*", "n10-lora-r8"));
        assert!(!matches("n10-*", "n100-lora-r8"));
        assert!(matches("*-lora-*", "n100-lora-r8"));
        assert!(matches("*r8", "n100-lora-r8"));
        assert!(!matches("*r8", "n100-lora-r80"));
        assert!(matches("*", "anything"));
    }
}
