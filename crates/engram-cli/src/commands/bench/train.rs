//! `engram bench train`: LoRA training throughput (tokens/s, padding excluded), time per epoch
//! and peak memory at several ranks, beside PEFT's (`../shared/peers/peft_train.py`) on the same
//! checkpoint, facts, batch size and thread count, measured in the same run. Each side trains in
//! its own child process so that peak RSS is per run (`wait4`'s `ru_maxrss`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use clap::Args;
use engram_checkpoint::Checkpoint;

use super::child::run_measured;
use super::peer::PeftRun;

/// Arguments of `engram bench train`.
#[derive(Args, Debug)]
pub struct TrainBenchArgs {
    /// The model (directory, .gguf, alias or hub id).
    #[arg(long, short = 'm', default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// Compute backend for engram.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Facts to train on.
    #[arg(long, default_value = "tests/fixtures/facts/synthetic-20.jsonl")]
    pub facts: PathBuf,
    /// Ranks to measure.
    #[arg(long, value_delimiter = ',', default_value = "8,64,256")]
    pub ranks: Vec<usize>,
    /// Batch size.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Epochs per run (the first is excluded from the median when there are several).
    #[arg(long, default_value_t = 2)]
    pub epochs: usize,
    /// Python with torch + transformers + peft for the peer (`none` to skip).
    #[arg(long, env = "ENGRAM_PEER_PYTHON", default_value = "python3")]
    pub peer_python: String,
    /// The peer script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/peers/peft_train.py"))]
    pub peer_script: PathBuf,
    /// Threads for the peer (engram's CPU backend uses every core).
    #[arg(long, default_value_t = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))]
    pub threads: usize,
    /// Benchmark this architecture (an HF config.json) instead of --model: with --random-weights,
    /// weights are drawn on the device, training steps run in-process on random tokens, and
    /// tokens/s, model FLOP/s, MFU and peak device memory are printed (no peer).
    #[arg(long, requires = "random_weights")]
    pub architecture: Option<PathBuf>,
    /// Random weights drawn on the device (with --architecture).
    #[arg(long, requires = "architecture")]
    pub random_weights: bool,
    /// Weight dtype for --random-weights: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Tokens per example for --random-weights (EnronQA's are about 60).
    #[arg(long, default_value_t = 64)]
    pub seq_len: usize,
    /// Label tokens per example for --random-weights (an answer and its end-of-turn).
    #[arg(long, default_value_t = 16)]
    pub label_len: usize,
    /// Timed optimizer steps per rank for --random-weights.
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Untimed steps before them (kernel compilation, autotuning).
    #[arg(long, default_value_t = 2)]
    pub warmup_steps: usize,
    /// The device's peak TFLOP/s for MFU (default: known GPUs' dense bf16/f16, or TF32, peak).
    #[arg(long)]
    pub peak_tflops: Option<f64>,
    /// The adapters' matmul dtype for engram: f32 or bf16 (`engram train --adapter-compute`).
    #[arg(long, default_value = "f32")]
    pub adapter_compute: engram_lora::AdapterCompute,
    /// engram trains with packed batches (`engram train --pack`); the peer pads as transformers'
    /// collator does.
    #[arg(long)]
    pub pack: bool,
    /// Also write the figures as JSON to this file (with --random-weights).
    #[arg(long)]
    pub json: Option<PathBuf>,
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

fn engram_run(a: &TrainBenchArgs, rank: usize, dir: &Path) -> Result<RunFigures> {
    let out = dir.join(format!("engram-r{rank}"));
    let mut cmd = Command::new(std::env::current_exe()?);
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

fn peer_run(a: &TrainBenchArgs, hf_dir: &Path, rank: usize, dir: &Path) -> Result<RunFigures> {
    let log = dir.join(format!("peft-r{rank}.json"));
    let peer = PeftRun {
        python: &a.peer_python,
        script: &a.peer_script,
        hf_dir,
        facts: &a.facts,
        rank,
        epochs: a.epochs,
        batch: a.batch,
        threads: a.threads,
    };
    let cmd = peer.command(&dir.join(format!("peft-r{rank}")), &log);
    let peak = run_measured(cmd, "peft_train.py")?;
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&log)?)?;
    Ok(RunFigures::from_record(&rec, peak))
}

/// Runs `engram bench train`.
pub fn run(a: TrainBenchArgs) -> Result<()> {
    if let Some(arch) = &a.architecture {
        let dtype = engram_model::WeightDType::parse(&a.dtype)
            .with_context(|| format!("--dtype {}: f32, bf16 or f16", a.dtype))?;
        let v = super::random::train(&super::random::TrainSpec {
            architecture: arch,
            backend: &a.backend,
            dtype,
            adapter_compute: a.adapter_compute.dtype(),
            ranks: &a.ranks,
            batch: a.batch,
            seq: a.seq_len,
            labels: a.label_len,
            warmup: a.warmup_steps,
            steps: a.steps,
            peak_tflops: a.peak_tflops,
        })?;
        if let Some(path) = &a.json {
            engram_io::write_file(path, serde_json::to_string_pretty(&v)?.as_bytes())?;
        }
        return Ok(());
    }
    let facts = engram_facts::read_facts(&a.facts)?;
    let work = tempfile::tempdir()?;
    // The peer reads an HF directory: the same checkpoint, written out (GGUF dequantized).
    let peer = if a.peer_python == "none" {
        None
    } else {
        let ckpt = Checkpoint::open(&a.model)?;
        let hf = work.path().join("hf");
        engram_lora::merge_to_hf(
            &ckpt,
            None,
            &hf,
            engram_checkpoint::DEFAULT_SHARD_BYTES,
            &burn::tensor::Device::flex(),
        )?;
        Some(hf)
    };
    println!(
        "engram bench train: {} on {}, {} facts, batch {}, {} epochs per run (median of epochs 2..), peer threads {}",
        a.model,
        a.backend,
        facts.len(),
        a.batch,
        a.epochs,
        a.threads
    );
    println!(
        "{:>5}  {:>11} {:>11} {:>7}  {:>9} {:>9}  {:>10} {:>10}",
        "rank", "tok/s", "peft tok/s", "ratio", "s/epoch", "peft s/ep", "peak MB", "peft MB"
    );
    for &rank in &a.ranks {
        let ours = engram_run(&a, rank, work.path())?;
        let theirs = match &peer {
            Some(hf) => peer_run(&a, hf, rank, work.path()),
            None => Err(anyhow::anyhow!("skipped (--peer-python none)")),
        };
        match &theirs {
            Ok(p) => println!(
                "{rank:>5}  {:>11.1} {:>11.1} {:>6.2}x  {:>9.1} {:>9.1}  {:>10.0} {:>10.0}",
                ours.tokens_per_s,
                p.tokens_per_s,
                ours.tokens_per_s / p.tokens_per_s,
                ours.epoch_secs,
                p.epoch_secs,
                ours.peak_rss_mb,
                p.peak_rss_mb
            ),
            Err(e) => println!(
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
    println!(
        "(ratio = engram / PEFT train tokens/s, padding excluded; peak = max RSS of each run's process)"
    );
    Ok(())
}
