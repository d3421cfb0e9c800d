//! The memorization table (EnronQA Table 5's layout): rows = number of facts, columns = Long
//! Context, RAG, LoRA r = …; accuracy on the original questions, `NA` where a method does not
//! fit. Rendered as Markdown and CSV, optionally beside reference values (`--compare`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::cells::Method;
use crate::error::{ExperimentError, Result};
use crate::record::{CellRecord, CellStatus};

/// One cell of the table.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Judged: correct answers of `n`.
    Accuracy {
        /// Correct / n.
        value: f64,
        /// Correct answers.
        correct: usize,
        /// Questions.
        n: usize,
    },
    /// The method does not apply.
    Na,
    /// The cell failed (its record holds the error).
    Failed,
}

/// The table of one results directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Experiment name(s) of the records.
    pub experiment: String,
    /// Judges named in the records.
    pub judges: Vec<String>,
    /// Row keys (fact counts), ascending.
    pub sizes: Vec<usize>,
    /// Column keys: long context, RAG, LoRA by rank.
    pub methods: Vec<Method>,
    /// The entries.
    pub entries: BTreeMap<(usize, Method), Entry>,
}

impl Table {
    /// Builds the table from cell records.
    pub fn from_records(records: &[CellRecord]) -> Self {
        let mut sizes = BTreeSet::new();
        let mut methods = BTreeSet::new();
        let mut names = BTreeSet::new();
        let mut judges = BTreeSet::new();
        let mut entries = BTreeMap::new();
        for r in records {
            sizes.insert(r.cell.facts);
            methods.insert(r.cell.method);
            names.insert(r.experiment.clone());
            if let Some(j) = &r.metrics.judged {
                judges.insert(j.judge.clone());
            }
            let e = match r.status {
                CellStatus::Done => {
                    let correct = r
                        .questions
                        .iter()
                        .filter(|q| q.correct == Some(true))
                        .count();
                    let n = r.questions.len();
                    Entry::Accuracy {
                        value: r.accuracy.unwrap_or(correct as f64 / n.max(1) as f64),
                        correct,
                        n,
                    }
                }
                CellStatus::Na => Entry::Na,
                CellStatus::Failed => Entry::Failed,
            };
            entries.insert((r.cell.facts, r.cell.method), e);
        }
        Self {
            experiment: names.into_iter().collect::<Vec<_>>().join(", "),
            judges: judges.into_iter().collect(),
            sizes: sizes.into_iter().collect(),
            methods: methods.into_iter().collect(),
            entries,
        }
    }

    fn text(&self, size: usize, m: Method) -> String {
        match self.entries.get(&(size, m)) {
            Some(Entry::Accuracy { value, .. }) => format!("{value:.3}"),
            Some(Entry::Na) => "NA".into(),
            Some(Entry::Failed) => "failed".into(),
            None => "–".into(),
        }
    }

    /// Markdown: a title, what the numbers are, the table; with `compare`, each measured value
    /// is followed by the reference value in parentheses.
    pub fn markdown(&self, compare: Option<&Reference>) -> String {
        let mut s = format!("# Memorization table: {}\n\n", self.experiment);
        s.push_str(
            "Accuracy on the original questions (LoRA trains on the rephrased ones), judged by ",
        );
        s.push_str(&if self.judges.is_empty() {
            "—".to_string()
        } else {
            self.judges.join(", ")
        });
        s.push_str(". NA: the facts do not fit the context window.");
        if let Some(r) = compare {
            s.push_str(&format!(" In parentheses: {}.", r.label));
        }
        s.push_str("\n\n| Facts |");
        for m in &self.methods {
            s.push_str(&format!(" {} |", m.header()));
        }
        s.push_str("\n|---:|");
        for _ in &self.methods {
            s.push_str("---:|");
        }
        s.push('\n');
        for &n in &self.sizes {
            s.push_str(&format!("| {n} |"));
            for &m in &self.methods {
                let mut cell = self.text(n, m);
                if let Some(r) = compare
                    && let Some(v) = r.values.get(&(n, m.header()))
                {
                    cell.push_str(&format!(" ({v})"));
                }
                s.push_str(&format!(" {cell} |"));
            }
            s.push('\n');
        }
        s
    }

    /// CSV: `facts` then one column per method header; `NA`, `failed`, or empty for missing.
    pub fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut header = vec!["facts".to_string()];
        header.extend(self.methods.iter().map(Method::header));
        w.write_record(&header).expect("in-memory csv");
        for &n in &self.sizes {
            let mut row = vec![n.to_string()];
            for &m in &self.methods {
                row.push(match self.entries.get(&(n, m)) {
                    Some(Entry::Accuracy { value, .. }) => format!("{value:.4}"),
                    Some(Entry::Na) => "NA".into(),
                    Some(Entry::Failed) => "failed".into(),
                    None => String::new(),
                });
            }
            w.write_record(&row).expect("in-memory csv");
        }
        String::from_utf8(w.into_inner().expect("flush")).expect("utf-8")
    }
}

/// Reference values to print beside the measured ones: a CSV in the table's own layout
/// (`facts`, then columns named like the table's headers: `Long Context`, `RAG`,
/// `LoRA r=8`, …), values as written there.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// What the values are (the file).
    pub label: String,
    /// (facts, column header) → value text.
    pub values: BTreeMap<(usize, String), String>,
}

impl Reference {
    /// Reads a reference CSV.
    pub fn read(path: &Path) -> Result<Self> {
        let bad = |message: String| ExperimentError::Config {
            path: path.to_path_buf(),
            message,
        };
        let mut r = csv::Reader::from_path(path).map_err(|e| bad(e.to_string()))?;
        let headers: Vec<String> = r
            .headers()
            .map_err(|e| bad(e.to_string()))?
            .iter()
            .map(str::to_string)
            .collect();
        if headers.first().map(String::as_str) != Some("facts") {
            return Err(bad("the first column must be `facts`".into()));
        }
        let mut values = BTreeMap::new();
        for (i, row) in r.records().enumerate() {
            let row = row.map_err(|e| bad(e.to_string()))?;
            let n: usize = row[0]
                .trim()
                .parse()
                .map_err(|_| bad(format!("row {}: `{}` is not a fact count", i + 2, &row[0])))?;
            for (h, v) in headers.iter().zip(row.iter()).skip(1) {
                if !v.trim().is_empty() {
                    values.insert((n, h.clone()), v.trim().to_string());
                }
            }
        }
        Ok(Self {
            label: path.display().to_string(),
            values,
        })
    }
}
