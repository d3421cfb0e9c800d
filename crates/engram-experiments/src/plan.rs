//! Planning a sweep: every selected cell with the configuration that decides its outcome (its
//! hash is the record's `config_hash`) and where it stands — done, never run, stale (its record
//! was made with another configuration), failed, or with a corrupt record. The sweep runs what
//! is not done; `--dry-run` lists the same plan with estimates.

use engram_facts::Fact;
use serde_json::{Value, json};

use crate::cells::{Cell, Method, expand, select};
use crate::experiment::Experiment;
use crate::facts::Samples;
use crate::record::{CellStatus, CurrentPlan, Found, ResultsDir};

/// Where a cell stands before the sweep.
#[derive(Debug, Clone, PartialEq)]
pub enum CellState {
    /// A record with the current configuration: nothing to do.
    Done,
    /// No record yet.
    Missing,
    /// A record made with another configuration: runs again.
    Stale,
    /// A record of a failure (the error): runs again.
    Failed(String),
    /// A record whose content is wrong (why): never used, runs again.
    Corrupt(String),
    /// A record the file system would not read just now (why): neither used nor run again, so
    /// that a passing I/O error never replaces a finished cell's record.
    Unreadable(String),
}

impl CellState {
    /// The word `--dry-run` shows.
    pub fn label(&self) -> &'static str {
        match self {
            CellState::Done => "done",
            CellState::Missing => "to run",
            CellState::Stale => "stale",
            CellState::Failed(_) => "failed",
            CellState::Corrupt(_) => "corrupt",
            CellState::Unreadable(_) => "unreadable",
        }
    }
}

/// A selected cell of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    /// The cell.
    pub cell: Cell,
    /// Everything that decides its outcome.
    pub config: Value,
    /// SHA-256 of `config`.
    pub hash: String,
    /// Where it stands.
    pub state: CellState,
}

impl PlannedCell {
    /// Whether the sweep runs it.
    pub fn runs(&self) -> bool {
        !matches!(self.state, CellState::Done | CellState::Unreadable(_))
    }
}

/// Everything that decides a cell's outcome (its hash is the record's `config_hash`). The
/// backend is left out: a sweep may move between machines.
pub fn cell_config(exp: &Experiment, cell: &Cell, facts: &[Fact]) -> Value {
    let fact_text: Vec<Value> = facts
        .iter()
        .map(|f| json!([f.id, f.question, f.rephrased_question, f.answer]))
        .collect();
    let mut judge = serde_json::to_value(&exp.judge).expect("judge preset serializes");
    // Settings that do not change a verdict stay out of the hash.
    if let Some(j) = judge.as_object_mut() {
        for k in ["concurrency", "cache", "api_key_env"] {
            j.remove(k);
        }
    }
    if let Some(prompt) = exp.judge.prompt_path(&exp.judge_dir()) {
        let text = std::fs::read_to_string(prompt).unwrap_or_default();
        judge["prompt_sha256"] = json!(hash_json(&json!(text)));
    }
    let mut cfg = json!({
        "experiment": exp.name,
        "model": {
            "source": exp.model.source,
            "dtype": exp.model.dtype,
            "context_window": exp.model.context_window,
        },
        "facts": {"n": facts.len(), "sha256": hash_json(&Value::Array(fact_text))},
        "method": cell.method,
        "answer": exp.answer,
        "judge": judge,
    });
    match cell.method {
        Method::Lora { rank } => {
            cfg["training"] = exp.training.outcome_settings(rank);
            // A further replicate trains with its own seed; the first keeps the configuration
            // (and so the hash) cells had before replicates existed.
            if cell.replicate > 0 {
                cfg["training"]["seed"] = json!(replicate_seed(exp, cell));
            }
        }
        Method::Rag => {
            cfg["rag"] = json!({
                "k": exp.methods.rag_k,
                "retriever": exp.methods.retriever,
                "encoder": (exp.methods.retriever == "dense").then_some(&exp.methods.encoder),
            });
        }
        Method::LongContext => {}
    }
    // A further replicate of long context or RAG exists only on facts of its own draw (their
    // hash already differs); it is named all the same.
    if cell.replicate > 0 {
        cfg["replicate"] = json!(cell.replicate);
    }
    cfg
}

/// SHA-256 (hex) of a JSON value's compact text: a cell's `config_hash` over [`cell_config`].
pub fn hash_json(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(v.to_string().as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The training seed of a LoRA cell: the preset's, plus the replicate's index.
pub fn replicate_seed(exp: &Experiment, cell: &Cell) -> u64 {
    exp.training.train.seed.wrapping_add(cell.replicate as u64)
}

/// The state of cell `id` in `results` for configuration `hash` (read again by a sweep once it
/// holds the cell's claim: another sweep may have finished it meanwhile).
pub fn state_of(results: &ResultsDir, id: &str, hash: &str) -> CellState {
    match results.read(id) {
        Found::Record(r) if r.config_hash != hash => CellState::Stale,
        Found::Record(r) if r.status == CellStatus::Failed => {
            CellState::Failed(r.error.unwrap_or_default())
        }
        Found::Record(_) => CellState::Done,
        Found::Corrupt(why) => CellState::Corrupt(why),
        Found::Unreadable(why) => CellState::Unreadable(why),
        Found::Missing => CellState::Missing,
    }
}

/// Every cell of `exp` with the hash its record must have ([`CurrentPlan`]); `samples` holds
/// the facts of every cell.
pub fn current_plan(exp: &Experiment, samples: &Samples) -> CurrentPlan {
    CurrentPlan {
        experiment: exp.name.clone(),
        cells: expand(exp)
            .into_iter()
            .map(|cell| {
                let hash = hash_json(&cell_config(exp, &cell, samples.of(&cell)));
                (cell.id(), hash)
            })
            .collect(),
    }
}

/// The cells of `exp` that `only` selects (all when empty), in table order, each with its
/// configuration and its state in `results`. `samples` holds the facts of every cell.
pub fn plan(
    exp: &Experiment,
    samples: &Samples,
    results: &ResultsDir,
    only: &[String],
) -> Vec<PlannedCell> {
    select(&expand(exp), only)
        .into_iter()
        .map(|cell| {
            let config = cell_config(exp, &cell, samples.of(&cell));
            let hash = hash_json(&config);
            let state = state_of(results, &cell.id(), &hash);
            PlannedCell {
                cell,
                config,
                hash,
                state,
            }
        })
        .collect()
}
