//! The cells of a sweep: every fact count × every method (long context, RAG, one LoRA rank
//! each) × every replicate of a LoRA cell, with stable ids (`n10-long-context`, `n10-rag`,
//! `n100-lora-r8`, and `n100-lora-r8-rep1` for a further replicate) and `--only` selection.

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

/// One (fact count, method, replicate) triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cell {
    /// Number of facts.
    pub facts: usize,
    /// The method.
    pub method: Method,
    /// Which run of a LoRA cell that is trained more than once (`[methods] replicates`): 0 is
    /// the first, trained with the preset's seed; replicate k trains with seed + k. Records
    /// of the first replicate (and every record made before replicates existed) leave it out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicate: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Cell {
    /// The first (or only) run of `method` on `facts` facts.
    pub fn new(facts: usize, method: Method) -> Self {
        Self {
            facts,
            method,
            replicate: 0,
        }
    }

    /// The cell's id: `n<facts>-<method>`, and `-rep<k>` for replicate k ≥ 1.
    pub fn id(&self) -> String {
        match self.replicate {
            0 => format!("n{}-{}", self.facts, self.method.slug()),
            k => format!("n{}-{}-rep{k}", self.facts, self.method.slug()),
        }
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
    let mut methods = Vec::new();
    if exp.methods.long_context {
        methods.push(Method::LongContext);
    }
    if exp.methods.rag {
        methods.push(Method::Rag);
    }
    methods.extend(ranks.into_iter().map(|rank| Method::Lora { rank }));
    let replicates = exp.methods.replicates.max(1);
    let mut cells = Vec::new();
    for &facts in &sizes {
        for &method in &methods {
            // Long context and RAG answer greedily: a further run of theirs differs only on
            // facts of its own.
            let runs = match method {
                Method::Lora { .. } => replicates,
                _ if exp.methods.resample_facts => replicates,
                _ => 1,
            };
            for replicate in 0..runs {
                cells.push(Cell {
                    replicate,
                    ..Cell::new(facts, method)
                });
            }
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

    #[test]
    fn replicates_have_ids_of_their_own_and_the_first_keeps_its_id() {
        let first = Cell::new(20, Method::Lora { rank: 8 });
        assert_eq!(first.id(), "n20-lora-r8");
        let second = Cell {
            replicate: 1,
            ..first
        };
        assert_eq!(second.id(), "n20-lora-r8-rep1");
        // The first replicate serializes as cells always have.
        assert_eq!(
            serde_json::to_string(&first).unwrap(),
            r#"{"facts":20,"method":{"kind":"lora","rank":8}}"#
        );
        let back: Cell = serde_json::from_str(&serde_json::to_string(&second).unwrap()).unwrap();
        assert_eq!(back, second);
        assert!(matches("n20-lora-r8*", &second.id()));
    }
}
