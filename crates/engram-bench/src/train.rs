//! `engram bench train`: LoRA training throughput (tokens/s, padding excluded), time per epoch
//! and peak memory at several ranks, beside PEFT's (`../shared/peers/peft_train.py`) on the same
//! checkpoint, facts, batch size and thread count, measured in the same run. Each side trains in
//! its own child process so that peak RSS is per run (`wait4`'s `ru_maxrss`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;
use engram_checkpoint::Checkpoint;

use crate::Out;
use crate::child::run_measured;
use crate::peer::PeftRun;

/// What `engram bench train` measures on a checkpoint.
pub struct TrainBench {
    /// The `engram` executable that trains (each run its own child process).
    pub engram: PathBuf,
    /// The model (directory, .gguf, alias or hub id).
    pub model: String,
    /// Compute backend for engram.
    pub backend: String,
    /// Facts to train on.
    pub facts: PathBuf,
    /// Ranks to measure.
    pub ranks: Vec<usize>,
    /// Batch size.
    pub batch: usize,
    /// Epochs per run (the first is excluded from the median when there are several).
    pub epochs: usize,
    /// PEFT beside engram (`None`: engram alone).
    pub peer: Option<PeftPeer>,
    /// engram trains with packed batches; the peer pads as transformers' collator does.
    pub pack: bool,
    /// The adapters' matmul dtype for engram.
    pub adapter_compute: engram_lora::AdapterCompute,
}

/// The PEFT side of `bench train`.
pub struct PeftPeer {
    /// Python with torch + transformers + peft.
    pub python: String,
    /// `peft_train.py`.
    pub script: PathBuf,
    /// torch threads.
    pub threads: usize,
}

/// Figures of one training run.
#[derive(Debug, Clone, Copy)]
struct RunFigures {
    tokens_per_s: f64,
    epoch_secs: f64,
    peak_rss_mb: f64,
}

impl RunFigures {
    /// Figures from a training log whose `epochs` carry `tokens_per_s` and `seconds` (engram's
    /// train_record.json and peft_train.py's --log-json share these keys).
    fn from_record(rec: &serde_json::Value, peak_rss_mb: f64) -> Self {
        let epochs = rec["epochs"].as_array().cloned().unwrap_or_default();
        let get = |k: &str| -> Vec<f64> { epochs.iter().filter_map(|e| e[k].as_f64()).collect() };
        Self {
            tokens_per_s: median(steady(get("tokens_per_s"))),
            epoch_secs: median(steady(get("seconds"))),
            peak_rss_mb,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// Drops the first epoch (allocation, warm-up) when there are several.
fn steady(v: Vec<f64>) -> Vec<f64> {
    if v.len() > 1 { v[1..].to_vec() } else { v }
}

fn engram_run(a: &TrainBench, rank: usize, dir: &Path) -> Result<RunFigures> {
    let out = dir.join(format!("engram-r{rank}"));
    let mut cmd = Command::new(&a.engram);
    cmd.args([
        "train",
        "--model",
        &a.model,
        "--backend",
        &a.backend,
        "--facts",
    ])
    .arg(&a.facts)
    .arg("--out")
    .arg(&out)
    .args([
        "--rank",
        &rank.to_string(),
        "--epochs",
        &a.epochs.to_string(),
    ])
    .args(["--batch-size", &a.batch.to_string(), "--lr", "1e-4"])
    // As the peer trains: constant lr, no warm-up, no clipping.
    .args([
        "--warmup-epochs",
        "0",
        "--constant-lr",
        "--max-grad-norm",
        "0",
    ])
    .arg("--no-checkpoints");
    if a.pack {
        cmd.arg("--pack");
    }
    cmd.args(["--adapter-compute", a.adapter_compute.name()]);
    let peak = run_measured(cmd, "engram train")?;
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(engram_lora::TRAIN_RECORD))?)?;
    Ok(RunFigures::from_record(&rec, peak))
}

fn peer_run(
    a: &TrainBench,
    p: &PeftPeer,
    hf_dir: &Path,
    rank: usize,
    dir: &Path,
) -> Result<RunFigures> {
    let log = dir.join(format!("peft-r{rank}.json"));
    let peer = PeftRun {
        python: &p.python,
        script: &p.script,
        hf_dir,
        facts: &a.facts,
        rank,
        epochs: a.epochs,
        batch: a.batch,
        threads: p.threads,
    };
    let cmd = peer.command(&dir.join(format!("peft-r{rank}")), &log);
    let peak = run_measured(cmd, "peft_train.py")?;
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&log)?)?;
    Ok(RunFigures::from_record(&rec, peak))
}

/// Trains at each rank, engram and then PEFT, and hands a table row per rank to `out`.
pub fn train(a: &TrainBench, out: Out) -> Result<()> {
    let facts = engram_facts::read_facts(&a.facts)?;
    let work = tempfile::tempdir()?;
    // The peer reads an HF directory: the same checkpoint, written out (GGUF dequantized).
    let peer = match &a.peer {
        Some(p) => {
            let ckpt = Checkpoint::open(&a.model)?;
            let hf = work.path().join("hf");
            engram_lora::merge_to_hf(
                &ckpt,
                None,
                &hf,
                engram_checkpoint::DEFAULT_SHARD_BYTES,
                &burn::tensor::Device::flex(),
            )?;
            Some((p, hf))
        }
        None => None,
    };
    say!(
        out,
        "engram bench train: {} on {}, {} facts, batch {}, {} epochs per run (median of epochs 2..), peer threads {}",
        a.model,
        a.backend,
        facts.len(),
        a.batch,
        a.epochs,
        a.peer
            .as_ref()
            .map_or("-".into(), |p| p.threads.to_string())
    );
    say!(
        out,
        "{:>5}  {:>11} {:>11} {:>7}  {:>9} {:>9}  {:>10} {:>10}",
        "rank",
        "tok/s",
        "peft tok/s",
        "ratio",
        "s/epoch",
        "peft s/ep",
        "peak MB",
        "peft MB"
    );
    for &rank in &a.ranks {
        let ours = engram_run(a, rank, work.path())?;
        let theirs = match &peer {
            Some((p, hf)) => peer_run(a, p, hf, rank, work.path()),
            None => Err(anyhow::anyhow!("skipped (--peer-python none)")),
        };
        match &theirs {
            Ok(p) => say!(
                out,
                "{rank:>5}  {:>11.1} {:>11.1} {:>6.2}x  {:>9.1} {:>9.1}  {:>10.0} {:>10.0}",
                ours.tokens_per_s,
                p.tokens_per_s,
                ours.tokens_per_s / p.tokens_per_s,
                ours.epoch_secs,
                p.epoch_secs,
                ours.peak_rss_mb,
                p.peak_rss_mb
            ),
            Err(e) => say!(
                out,
                "{rank:>5}  {:>11.1} {:>11} {:>7}  {:>9.1} {:>9}  {:>10.0} {:>10}   (peer: {})",
                ours.tokens_per_s,
                "-",
                "-",
                ours.epoch_secs,
                "-",
                ours.peak_rss_mb,
                "-",
                engram_io::error_text(e.as_ref())
            ),
        }
    }
    say!(
        out,
        "(ratio = engram / PEFT train tokens/s, padding excluded; peak = max RSS of each run's process)"
    );
    Ok(())
}
