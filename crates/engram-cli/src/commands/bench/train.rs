//! `engram bench train`: LoRA training throughput beside PEFT's on a checkpoint
//! ([`engram_bench::train`]), or training steps of an architecture with random weights
//! ([`engram_bench::random_train`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use engram_bench::{PeftPeer, RandomTrain, TrainBench};

use super::{print_line, weight_dtype, write_json};

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
    /// With --random-weights: also time each rank's step captured once and replayed (a CUDA
    /// graph; CubeCL's software graph on wgpu) beside the same step run eagerly, and compare
    /// their losses step by step.
    #[arg(long, requires = "random_weights")]
    pub graph: bool,
    /// Also write the figures as JSON to this file (with --random-weights).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `engram bench train`.
pub fn run(a: TrainBenchArgs) -> Result<()> {
    if let Some(arch) = &a.architecture {
        let dtype = weight_dtype(&a.dtype)?;
        let v = engram_bench::random_train(
            &RandomTrain {
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
                process_start: crate::started(),
                graph: a.graph,
            },
            &mut print_line,
        )?;
        write_json(a.json.as_deref(), &v)?;
        // A rank that failed is a row of its own (the others measured, the JSON written); the
        // command still fails, naming it.
        let failed: Vec<String> = v["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| Some(format!("rank {}: {}", r["rank"], r["failed"].as_str()?)))
            .collect();
        if !failed.is_empty() {
            anyhow::bail!("{}", failed.join("; "));
        }
        return Ok(());
    }
    let bench = TrainBench {
        engram: std::env::current_exe()?,
        model: a.model,
        backend: a.backend,
        facts: a.facts,
        ranks: a.ranks,
        batch: a.batch,
        epochs: a.epochs,
        peer: (a.peer_python != "none").then_some(PeftPeer {
            python: a.peer_python,
            script: a.peer_script,
            threads: a.threads,
        }),
        pack: a.pack,
        adapter_compute: a.adapter_compute,
    };
    engram_bench::train(&bench, &mut print_line)
}
