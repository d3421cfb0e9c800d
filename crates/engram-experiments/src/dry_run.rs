//! `engram sweep --dry-run`: the cells a sweep would run, which are already done, and an
//! estimate of each one's time and peak memory (see [`crate::estimate`]).

use std::path::Path;

use anyhow::Result;
use engram_checkpoint::Checkpoint;
use engram_facts::Fact;
use engram_model::LlamaConfig;

use crate::corpus_facts;
use crate::estimate::{estimate, human_bytes, human_seconds};
use crate::experiment::Experiment;
use crate::facts::{load_pool, samples};
use crate::plan::{CellState, plan};
use crate::record::ResultsDir;

/// The model's architecture without loading weights: the preset's `architecture` file, or the
/// config of a checkpoint that is already on this machine (a local path or a cached registry
/// model). `None` when neither is available (a hub model not yet downloaded).
pub fn architecture(exp: &Experiment) -> Option<(LlamaConfig, String)> {
    if exp.model.architecture.is_some() {
        // Read when the experiment loaded (it refuses one that does not read).
        return exp.architecture_file().ok().flatten();
    }
    local_architecture(&exp.model_source())
}

/// The architecture of model `source` (a path, a registry alias or a hub id, as `--model`
/// takes it) from its config alone, where the checkpoint is already on this machine; `None`
/// for a model not yet downloaded or a config that does not read.
pub fn local_architecture(source: &str) -> Option<(LlamaConfig, String)> {
    let local = Path::new(source).exists()
        || engram_checkpoint::model_store::find(source).is_some_and(|m| m.cached().is_some());
    if !local {
        return None;
    }
    let ckpt = Checkpoint::open(source).ok()?;
    let cfg = LlamaConfig::from_hf_json(&ckpt.config, &ckpt.config_origin).ok()?;
    Some((cfg, ckpt.origin))
}

/// `n` stand-in facts with the lengths of typical EnronQA questions (~120 characters) and answers
/// (~40), for estimates when the real facts are not on this machine.
fn placeholder_facts(n: usize) -> Vec<Fact> {
    (0..n)
        .map(|i| Fact {
            id: format!("placeholder-{i}"),
            question: "q".repeat(120),
            rephrased_question: "r".repeat(120),
            answer: "a".repeat(40),
            source: None,
        })
        .collect()
}

/// The dry-run report of `exp` over `results` with `only` selected, at `flops` FLOP/s.
pub fn dry_run(exp: &Experiment, results: &Path, only: &[String], flops: f64) -> Result<String> {
    let (pool, source, placeholder) = match load_pool(exp) {
        Ok((pool, source)) => (pool, source, false),
        Err(e) => {
            let n = exp.facts.sizes.iter().copied().max().unwrap_or(0);
            (
                placeholder_facts(n),
                format!(
                    "placeholders of EnronQA's typical length, since the facts are not here ({e})"
                ),
                true,
            )
        }
    };
    let samples = samples(exp, &pool, &source)?;
    let cells = plan(exp, &samples, &ResultsDir::new(results), only);
    let arch = architecture(exp);
    let mut s = format!(
        "{}: {} cells, facts from {source}, results in {}\n",
        exp.name,
        cells.len(),
        results.display()
    );
    if placeholder && exp.facts.source == "corpus" {
        for line in corpus_facts::estimate_lines(exp)? {
            s.push_str(&line);
            s.push('\n');
        }
    }
    match &arch {
        Some((cfg, origin)) => s.push_str(&format!(
            "model {} ({:.2} B parameters, from {origin}); estimates at {:.2} TFLOP/s (--tflops)\n\n",
            exp.model.source,
            cfg.num_parameters() as f64 / 1e9,
            flops / 1e12
        )),
        None => s.push_str(&format!(
            "model {}: architecture unknown without downloading it (set `architecture` in {}), so no estimates\n\n",
            exp.model.source,
            exp.model_file.display()
        )),
    }
    s.push_str(&format!(
        "{:<22} {:<9} {:>10} {:>11} {:>14}  note\n",
        "cell", "status", "time", "peak mem", "adapter state"
    ));
    let (mut total_s, mut pending) = (0.0, 0);
    for planned in &cells {
        let (cell, facts) = (&planned.cell, samples.of(&planned.cell));
        // Placeholder facts hash differently from the real ones: a record's state is unknown.
        let status = match planned.state {
            CellState::Missing | CellState::Corrupt(_) => planned.state.label(),
            _ if placeholder => "unknown",
            _ => planned.state.label(),
        };
        let (time, mem, adapter, note) = match &arch {
            Some((cfg, _)) => {
                let e = estimate(exp, cfg, cell, facts, flops);
                if status != "done" {
                    total_s += e.seconds;
                }
                (
                    human_seconds(e.seconds),
                    human_bytes(e.peak_bytes),
                    if e.adapter_state_bytes > 0.0 {
                        human_bytes(e.adapter_state_bytes)
                    } else {
                        "-".into()
                    },
                    e.note.unwrap_or_default(),
                )
            }
            None => ("?".into(), "?".into(), "?".into(), String::new()),
        };
        if status != "done" {
            pending += 1;
        }
        s.push_str(&format!(
            "{:<22} {:<9} {:>10} {:>11} {:>14}  {note}\n",
            cell.id(),
            status,
            time,
            mem,
            adapter
        ));
    }
    s.push_str(&format!("\n{pending} cells to run"));
    if arch.is_some() {
        s.push_str(&format!(", about {} in all", human_seconds(total_s)));
    }
    s.push('\n');
    Ok(s)
}
