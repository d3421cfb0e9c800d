//! The Python peers the benchmarks measure engram against, each run as a child process in the
//! same run: transformers' and llama.cpp's greedy generation (`tests/peers/hf_generate_bench.py`,
//! `tests/peers/llamacpp_generate_bench.py`) and PEFT's LoRA training
//! (`../shared/peers/peft_train.py`).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::figures::{Figures, Measured, Peer};

/// The script that measures `peer`.
fn generate_script(peer: Peer) -> std::path::PathBuf {
    let name = match peer {
        Peer::Transformers => "hf_generate_bench.py",
        Peer::LlamaCpp => "llamacpp_generate_bench.py",
    };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers")
        .join(name)
}

/// The GGUF path inside a checkpoint origin (`alias (path)` or a path).
fn gguf_path(origin: &str) -> &str {
    origin
        .rsplit_once(" (")
        .map(|(_, p)| p.trim_end_matches(')'))
        .unwrap_or(origin)
}

/// A peer's prefill and decode figures and greedy tokens (llama.cpp: with their
/// log-probabilities) for each batch of prompts, on the same GGUF file, run with `python`
/// (`none`: skipped).
pub fn generate(
    peer: Peer,
    python: &str,
    origin: &str,
    batches: &[Vec<Vec<u32>>],
    new_tokens: usize,
    threads: usize,
    repeats: usize,
) -> Result<Vec<Measured>> {
    if python == "none" {
        bail!("skipped (--peer-python none)");
    }
    let path = gguf_path(origin);
    if !path.ends_with(".gguf") {
        bail!(
            "the {} peer is wired for GGUF models only ({path})",
            peer.name()
        );
    }
    let dir = tempfile::tempdir()?;
    let spec = dir.path().join("prompts.json");
    std::fs::write(
        &spec,
        serde_json::json!({"batches": batches, "new_tokens": new_tokens}).to_string(),
    )?;
    let out = Command::new(python)
        .arg(generate_script(peer))
        .arg(path)
        .arg(&spec)
        .args(["--threads", &threads.to_string()])
        .args(["--repeats", &repeats.to_string()])
        .output()
        .with_context(|| format!("running {python}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        bail!("{python} exited with {}: {last}", out.status);
    }
    let mut figs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        figs.push(Measured {
            figures: Figures {
                prefill_tokens: v["prefill_tokens"].as_u64().unwrap_or(0) as usize,
                prefill_secs: v["prefill_secs"].as_f64().unwrap_or(f64::NAN),
                decode_tokens: v["decode_tokens"].as_u64().unwrap_or(0) as usize,
                decode_secs: v["decode_secs"].as_f64().unwrap_or(f64::NAN),
            },
            tokens: serde_json::from_value(v["tokens"].clone()).unwrap_or_default(),
            logprobs: serde_json::from_value(v["logprobs"].clone()).unwrap_or_default(),
        });
    }
    Ok(figs)
}

/// What `peft_train.py` needs to train like `engram train` does in the benchmark.
pub struct PeftRun<'a> {
    /// The peer's Python.
    pub python: &'a str,
    /// `peft_train.py`.
    pub script: &'a Path,
    /// The checkpoint as an HF directory.
    pub hf_dir: &'a Path,
    /// The facts.
    pub facts: &'a Path,
    /// LoRA rank.
    pub rank: usize,
    /// Epochs.
    pub epochs: usize,
    /// Batch size.
    pub batch: usize,
    /// torch threads.
    pub threads: usize,
}

impl PeftRun<'_> {
    /// The command that trains into `out` and logs per-epoch figures to `log` (constant lr
    /// 1e-4, no evaluation).
    pub fn command(&self, out: &Path, log: &Path) -> Command {
        let mut cmd = Command::new(self.python);
        cmd.arg(self.script)
            .arg(self.hf_dir)
            .arg(self.facts)
            .args(["--rank", &self.rank.to_string()])
            .args(["--epochs", &self.epochs.to_string()])
            .args([
                "--batch",
                &self.batch.to_string(),
                "--lr",
                "1e-4",
                "--no-eval",
            ])
            .args(["--threads", &self.threads.to_string()])
            .arg("--out")
            .arg(out)
            .arg("--log-json")
            .arg(log);
        cmd
    }
}
