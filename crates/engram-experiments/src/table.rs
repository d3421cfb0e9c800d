//! The memorization table (EnronQA Table 5's layout): rows = number of facts, columns = Long
//! Context, RAG, LoRA r = …; accuracy on the original questions with its 95 % interval (Wilson's
//! for one run; with replicates their mean and a bootstrap over facts and replicates), `NA`
//! where a method does not fit, `diverged` / `collapsed` where training went wrong
//! ([`crate::health`]); then every LoRA rank against RAG and long context on the same facts
//! (paired difference, the exact sign test over facts). Rendered as Markdown and CSV, optionally beside
//! reference values (`--compare`), marking the cells whose interval excludes them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::cells::Method;
use crate::error::{ExperimentError, Result};
use crate::health::{Health, health_of};
use crate::record::{CellRecord, CellStatus, CurrentPlan};
use crate::stats::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Interval, Paired, Z95, bootstrap, wilson};

/// One cell of the table.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Judged: the mean accuracy over the replicates with its interval.
    Accuracy {
        /// Mean accuracy (correct / n for a single run).
        value: f64,
        /// Correct answers, over every replicate.
        correct: usize,
        /// Answers, over every replicate (facts × replicates).
        n: usize,
        /// 95 % interval: Wilson's for a single run, the bootstrap's over several.
        interval: Option<Interval>,
        /// Each replicate's accuracy, by replicate index.
        replicates: Vec<f64>,
        /// Each replicate's outcome per fact (1 right, 0 not), the facts in the order of
        /// `runs`' ids.
        outcomes: Vec<Vec<f64>>,
        /// What each row of `outcomes` is: its replicate and its facts' ids, sorted (the order
        /// of its outcomes; the same for every row unless facts are resampled per replicate).
        runs: Vec<(usize, Vec<String>)>,
        /// Replicates left out because their training went wrong: (replicate, why).
        excluded: Vec<(usize, String)>,
    },
    /// The method does not apply.
    Na,
    /// The cell failed (its record holds the error).
    Failed,
    /// Every replicate's training diverged (the loss went non-finite or ended above where it
    /// started): no accuracy is shown.
    Diverged(String),
    /// Every replicate's training collapsed (the loss fell, then rose far above its lowest).
    Collapsed(String),
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
    /// Records that are not their cell's current one ([`CurrentPlan::stale_reason`]), by the
    /// entry they are part of: (cell id, why). Their entries are marked `‡`.
    pub stale: BTreeMap<(usize, Method), Vec<(String, String)>>,
}

impl Table {
    /// Builds the table from cell records (replicates of a cell are gathered into one entry).
    pub fn from_records(records: &[CellRecord]) -> Self {
        Self::with_plan(records, None)
    }

    /// As [`Table::from_records`], marking the records that are not current in `plan` (made
    /// with an earlier configuration, or of a cell the experiment no longer has): they are
    /// shown, marked `‡`, and listed with why.
    pub fn with_plan(records: &[CellRecord], plan: Option<&CurrentPlan>) -> Self {
        let mut stale: BTreeMap<(usize, Method), Vec<(String, String)>> = BTreeMap::new();
        for r in records {
            if let Some(why) = plan.and_then(|p| p.stale_reason(r)) {
                stale
                    .entry((r.cell.facts, r.cell.method))
                    .or_default()
                    .push((r.cell_id.clone(), why));
            }
        }
        let mut sizes = BTreeSet::new();
        let mut methods = BTreeSet::new();
        let mut names = BTreeSet::new();
        let mut judges = BTreeSet::new();
        let mut groups: BTreeMap<(usize, Method), Vec<&CellRecord>> = BTreeMap::new();
        for r in records {
            sizes.insert(r.cell.facts);
            methods.insert(r.cell.method);
            names.insert(r.experiment.clone());
            if let Some(j) = &r.metrics.judged {
                judges.insert(j.judge.clone());
            }
            groups
                .entry((r.cell.facts, r.cell.method))
                .or_default()
                .push(r);
        }
        let entries = groups
            .into_iter()
            .map(|(key, mut group)| {
                group.sort_by_key(|r| r.cell.replicate);
                (key, entry(&group))
            })
            .collect();
        Self {
            experiment: names.into_iter().collect::<Vec<_>>().join(", "),
            judges: judges.into_iter().collect(),
            sizes: sizes.into_iter().collect(),
            methods: methods.into_iter().collect(),
            entries,
            stale,
        }
    }

    fn text(&self, size: usize, m: Method) -> String {
        let mut t = self.entry_text(size, m);
        if self.stale.contains_key(&(size, m)) {
            t.push('‡');
        }
        t
    }

    fn entry_text(&self, size: usize, m: Method) -> String {
        match self.entries.get(&(size, m)) {
            Some(Entry::Accuracy {
                value,
                interval,
                replicates,
                excluded,
                ..
            }) => {
                let mut t = format!("{value:.3}");
                if let Some(i) = interval {
                    t.push_str(&format!(" [{:.2}, {:.2}]", i.low, i.high));
                }
                if replicates.len() > 1 {
                    t.push_str(&format!(" ×{}", replicates.len()));
                }
                if !excluded.is_empty() {
                    t.push('†');
                }
                t
            }
            Some(Entry::Na) => "NA".into(),
            Some(Entry::Failed) => "failed".into(),
            Some(Entry::Diverged(_)) => "diverged".into(),
            Some(Entry::Collapsed(_)) => "collapsed".into(),
            None => "–".into(),
        }
    }

    /// Markdown: a title, what the numbers are, the table; with `compare`, each measured value
    /// is followed by the reference value in parentheses, marked `*` where the measured
    /// interval excludes it. Then the paired comparisons and the training-health notes.
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
        s.push_str(
            ", with its 95 % interval in brackets: Wilson's for one run; for ×k replicates \
             (LoRA trained with k seeds) their mean and a bootstrap over facts and replicates. \
             NA: the facts do not fit the context window.",
        );
        if self.resampled() {
            s.push_str(
                " Facts resampled per replicate: replicate k of every method answers its own \
                 sample of each size, so the interval covers the choice of facts too, and \
                 methods are paired within a replicate.",
            );
        }
        if let Some(r) = compare {
            s.push_str(&format!(
                " In parentheses: {}; `*` where the interval excludes it.",
                r.label
            ));
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
                    if self.excludes(n, m, v) {
                        cell.push('*');
                    }
                }
                s.push_str(&format!(" {cell} |"));
            }
            s.push('\n');
        }
        let pairs = self.standard_pairs();
        if !pairs.is_empty() {
            s.push_str(
                "\n## Paired comparisons\n\nBoth methods answer the same facts: the difference \
                 of their accuracies with a 95 % bootstrap interval over the facts, the facts \
                 each did better on (its answers to the fact averaged over its replicates, a \
                 single greedy run paired with each replicate of the other method; with one run \
                 each, the facts only it got right), and the exact sign test over those facts \
                 (McNemar's exact test with one run each). The fact is the unit: replicates \
                 answer the same facts and are not independent observations.\n\n\
                 | Facts | Comparison | Difference [95 %] | First better | Second better | Sign test p |\n\
                 |---:|---|---:|---:|---:|---:|\n",
            );
            for (n, a, b, p) in &pairs {
                s.push_str(&format!(
                    "| {n} | {} − {} | {} | {} | {} | {} |\n",
                    a.header(),
                    b.header(),
                    difference_text(p),
                    p.first_better,
                    p.second_better,
                    p_text(p.p_value)
                ));
            }
        }
        let notes = self.health_notes();
        if !notes.is_empty() {
            s.push_str("\n## Training health\n\n");
            for n in notes {
                s.push_str(&format!("- {n}\n"));
            }
        }
        if !self.stale.is_empty() {
            s.push_str(
                "\n## Stale cells\n\n‡: shown, but not what the experiment's current \
                 configuration would give (nor are the comparisons that use them); run the sweep \
                 again without `--only` to replace them, or delete their records.\n\n",
            );
            for records in self.stale.values() {
                for (id, why) in records {
                    s.push_str(&format!("- {id}: {why}\n"));
                }
            }
        }
        s
    }

    /// Whether cell (n, m)'s interval excludes the reference value `v` (a number).
    fn excludes(&self, n: usize, m: Method, v: &str) -> bool {
        match (self.entries.get(&(n, m)), v.parse::<f64>()) {
            (
                Some(Entry::Accuracy {
                    interval: Some(i), ..
                }),
                Ok(v),
            ) => v < i.low - 1e-12 || v > i.high + 1e-12,
            _ => false,
        }
    }

    /// What the training-health marks stand for: a line per cell marked `diverged`,
    /// `collapsed` or `†`.
    fn health_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for ((n, m), e) in &self.entries {
            let at = format!("{n} facts, {}", m.header());
            match e {
                Entry::Diverged(why) => notes.push(format!("{at}: diverged — {why}")),
                Entry::Collapsed(why) => notes.push(format!("{at}: collapsed — {why}")),
                Entry::Accuracy { excluded, .. } => {
                    for (k, why) in excluded {
                        notes.push(format!("{at} †: replicate {k} left out — {why}"));
                    }
                }
                _ => {}
            }
        }
        notes
    }

    /// The method `name` names in this table: a slug (`lora-r8`, `rag`, `long-context`) or a
    /// header (`LoRA r=8`).
    pub fn method_named(&self, name: &str) -> Result<Method> {
        self.methods
            .iter()
            .copied()
            .find(|m| m.slug() == name || m.header().eq_ignore_ascii_case(name))
            .ok_or_else(|| ExperimentError::UnknownMethod {
                name: name.to_string(),
                known: self
                    .methods
                    .iter()
                    .map(Method::slug)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Whether some cell's runs answered different facts (`[methods] resample_facts`).
    pub fn resampled(&self) -> bool {
        self.entries.values().any(|e| match e {
            Entry::Accuracy { runs, .. } => runs.windows(2).any(|w| w[0].1 != w[1].1),
            _ => false,
        })
    }

    /// `a` against `b` at `n` facts, where both have judged answers: their runs on the same
    /// facts paired — the same replicate, or a single run (long context and RAG answering
    /// greedily once) with each replicate of the other.
    pub fn paired(&self, n: usize, a: Method, b: Method) -> Option<Paired> {
        let runs = |m| match self.entries.get(&(n, m)) {
            Some(Entry::Accuracy { outcomes, runs, .. }) => Some((outcomes, runs)),
            _ => None,
        };
        let ((xa, ra), (xb, rb)) = (runs(a)?, runs(b)?);
        let mut outcomes = Vec::new();
        for (i, (rep_a, ids_a)) in ra.iter().enumerate() {
            for (j, (rep_b, ids_b)) in rb.iter().enumerate() {
                let same_run = rep_a == rep_b || ra.len() == 1 || rb.len() == 1;
                if same_run && ids_a == ids_b {
                    for (k, id) in ids_a.iter().enumerate() {
                        outcomes.push((id.as_str(), xa[i][k], xb[j][k]));
                    }
                }
            }
        }
        crate::stats::paired(outcomes, BOOTSTRAP_SEED)
    }

    /// Every size where both have judged answers: `a` against `b`.
    pub fn paired_rows(&self, a: Method, b: Method) -> Vec<(usize, Paired)> {
        self.sizes
            .iter()
            .filter_map(|&n| self.paired(n, a, b).map(|p| (n, p)))
            .collect()
    }

    /// The comparisons `table.md` shows: each LoRA rank against RAG and long context.
    fn standard_pairs(&self) -> Vec<(usize, Method, Method, Paired)> {
        let mut out = Vec::new();
        for &n in &self.sizes {
            for &a in self
                .methods
                .iter()
                .filter(|m| matches!(m, Method::Lora { .. }))
            {
                for b in [Method::Rag, Method::LongContext] {
                    if let Some(p) = self.paired(n, a, b) {
                        out.push((n, a, b, p));
                    }
                }
            }
        }
        out
    }

    /// CSV, one row per cell: `facts`, `method` (its header), `status` (done, NA, failed,
    /// diverged, collapsed), `mean`, `low`, `high` (the 95 % interval), `n` (answers: facts ×
    /// replicates), `replicates`, `accuracies` (each replicate's, `;`-separated), `stale` (why
    /// some record of the cell is not current, `;`-separated; empty when all are).
    pub fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "facts",
            "method",
            "status",
            "mean",
            "low",
            "high",
            "n",
            "replicates",
            "accuracies",
            "stale",
        ])
        .expect("in-memory csv");
        for &n in &self.sizes {
            for &m in &self.methods {
                let Some(e) = self.entries.get(&(n, m)) else {
                    continue;
                };
                let mut row = vec![n.to_string(), m.header()];
                match e {
                    Entry::Accuracy {
                        value,
                        interval,
                        n: answers,
                        replicates,
                        ..
                    } => {
                        row.push("done".into());
                        row.push(format!("{value:.4}"));
                        row.push(interval.map_or(String::new(), |i| format!("{:.4}", i.low)));
                        row.push(interval.map_or(String::new(), |i| format!("{:.4}", i.high)));
                        row.push(answers.to_string());
                        row.push(replicates.len().to_string());
                        row.push(
                            replicates
                                .iter()
                                .map(|a| format!("{a:.4}"))
                                .collect::<Vec<_>>()
                                .join(";"),
                        );
                    }
                    other => {
                        row.push(
                            match other {
                                Entry::Na => "NA",
                                Entry::Failed => "failed",
                                Entry::Diverged(_) => "diverged",
                                _ => "collapsed",
                            }
                            .into(),
                        );
                        row.extend(std::iter::repeat_n(String::new(), 6));
                    }
                }
                row.push(self.stale.get(&(n, m)).map_or(String::new(), |records| {
                    records
                        .iter()
                        .map(|(id, why)| format!("{id}: {why}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                }));
                w.write_record(&row).expect("in-memory csv");
            }
        }
        String::from_utf8(w.into_inner().expect("flush")).expect("utf-8")
    }
}

/// A paired comparison's difference with its 95 % interval: `+0.350 [+0.12, +0.58]`.
pub fn difference_text(p: &Paired) -> String {
    format!(
        "{:+.3} [{:+.2}, {:+.2}]",
        p.difference.mean, p.difference.low, p.difference.high
    )
}

/// A p-value for people: three significant digits, `< 0.001` below that.
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// The entry of one (size, method): its replicates' records, by replicate index; `ids` the
/// facts of the size in id order.
fn entry(group: &[&CellRecord]) -> Entry {
    let mut done = Vec::new();
    let mut excluded = Vec::new();
    let (mut na, mut unhealthy) = (false, None);
    for r in group {
        match r.status {
            CellStatus::Done => match health_of(r) {
                Health::Fine => done.push(*r),
                bad => {
                    excluded.push((r.cell.replicate, bad.why().to_string()));
                    unhealthy.get_or_insert(bad);
                }
            },
            CellStatus::Na => na = true,
            CellStatus::Failed => {}
        }
    }
    if done.is_empty() {
        return match (na, unhealthy) {
            (true, _) => Entry::Na,
            (_, Some(Health::Diverged(why))) => Entry::Diverged(why),
            (_, Some(Health::Collapsed(why))) => Entry::Collapsed(why),
            _ => Entry::Failed,
        };
    }
    // Each run's outcomes over its own facts, by id (the facts of a size are one set unless
    // resampled per replicate).
    let runs: Vec<(usize, Vec<String>)> = done
        .iter()
        .map(|r| {
            let mut ids: Vec<String> = r.questions.iter().map(|q| q.id.clone()).collect();
            ids.sort();
            (r.cell.replicate, ids)
        })
        .collect();
    let outcomes: Vec<Vec<f64>> = done
        .iter()
        .zip(&runs)
        .map(|(r, (_, ids))| {
            let right: BTreeMap<&str, bool> = r
                .questions
                .iter()
                .map(|q| (q.id.as_str(), q.correct == Some(true)))
                .collect();
            ids.iter()
                .map(|id| f64::from(right.get(id.as_str()) == Some(&true)))
                .collect()
        })
        .collect();
    // Each replicate's right answers, counted once.
    let rights: Vec<usize> = done
        .iter()
        .map(|r| {
            r.questions
                .iter()
                .filter(|q| q.correct == Some(true))
                .count()
        })
        .collect();
    let correct: usize = rights.iter().sum();
    let n: usize = done.iter().map(|r| r.questions.len()).sum();
    let replicates: Vec<f64> = done
        .iter()
        .zip(&rights)
        .map(|(r, &c)| {
            r.accuracy
                .unwrap_or(c as f64 / r.questions.len().max(1) as f64)
        })
        .collect();
    let value = replicates.iter().sum::<f64>() / replicates.len() as f64;
    let interval = if done.len() == 1 {
        wilson(correct, n, Z95).map(|i| Interval { mean: value, ..i })
    } else {
        bootstrap(&outcomes, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
            .map(|i| Interval { mean: value, ..i })
    };
    Entry::Accuracy {
        value,
        correct,
        n,
        interval,
        replicates,
        outcomes,
        runs,
        excluded,
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
