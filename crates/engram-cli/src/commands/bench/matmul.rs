//! `engram bench matmul`: each matrix product of one LoRA training step, timed on the device,
//! beside torch's on the same shapes ([`engram_bench::matmul`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use engram_bench::{MatmulBench, SplitK};

use super::{print_line, weight_dtype, write_json};

/// Arguments of `engram bench matmul`.
#[derive(Args, Debug)]
pub struct MatmulBenchArgs {
    /// The architecture (an HF config.json) whose training step's products are timed.
    #[arg(
        long,
        default_value = "configs/models/llama-3.1-8b-instruct.config.json"
    )]
    pub architecture: PathBuf,
    /// Compute backend.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// The frozen weights' dtype: f32, bf16 or f16.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// The adapters' matmul dtype: f32 or bf16 (`engram train --adapter-compute`).
    #[arg(long, default_value = "f32")]
    pub adapter_compute: engram_lora::AdapterCompute,
    /// LoRA rank.
    #[arg(long, default_value_t = 8)]
    pub rank: usize,
    /// Examples per step.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Tokens per example.
    #[arg(long, default_value_t = 64)]
    pub seq_len: usize,
    /// Label tokens per example (the language-model head's rows).
    #[arg(long, default_value_t = 16)]
    pub label_len: usize,
    /// Untimed calls per product first (the first compiles its kernels and autotunes).
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed calls per product.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Skinny products also timed split along k: auto (few output columns over a long k, in
    /// slices of about 512), off, or a number of slices for every adapter product it divides.
    #[arg(long, default_value = "auto")]
    pub split_k: SplitK,
    /// Only the products whose name contains one of these (e.g. `fwd q/k/v,dH`).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// The device's peak TFLOP/s (default: a known GPU's dense peak for each product's dtype).
    #[arg(long)]
    pub peak_tflops: Option<f64>,
    /// Python with torch for the peer on the same products (`none` to skip).
    #[arg(long, env = "ENGRAM_PEER_PYTHON", default_value = "none")]
    pub peer_python: String,
    /// torch's device for the peer: auto (cuda with `--backend cuda`, else cpu), cuda or cpu.
    #[arg(long, default_value = "auto")]
    pub peer_device: String,
    /// The peer script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/peers/torch_matmul_bench.py"))]
    pub peer_script: PathBuf,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `engram bench matmul`.
pub fn run(a: MatmulBenchArgs) -> Result<()> {
    let dtype = weight_dtype(&a.dtype)?;
    let v = engram_bench::matmul(
        &MatmulBench {
            architecture: &a.architecture,
            backend: &a.backend,
            dtype,
            adapter_compute: a.adapter_compute.dtype(),
            rank: a.rank,
            batch: a.batch,
            seq: a.seq_len,
            labels: a.label_len,
            warmup: a.warmup,
            iters: a.iters,
            split_k: a.split_k,
            only: &a.only,
            peak_tflops: a.peak_tflops,
            peer: (a.peer_python != "none").then(|| {
                let device = match a.peer_device.as_str() {
                    "auto" if a.backend == "cuda" => "cuda".to_string(),
                    "auto" => "cpu".to_string(),
                    d => d.to_string(),
                };
                (a.peer_python.clone(), a.peer_script.clone(), device)
            }),
        },
        &mut print_line,
    )?;
    write_json(a.json.as_deref(), &v)
}
