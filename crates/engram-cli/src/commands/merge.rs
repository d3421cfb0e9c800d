//! `engram merge`: base + adapter written as an HF checkpoint (sharded safetensors).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use engram_checkpoint::Checkpoint;
use engram_checkpoint::DEFAULT_SHARD_BYTES;
use engram_lora::load_adapter;
use engram_model::device_from_name;

/// Arguments of `engram merge`.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The base model (directory, .gguf, alias or hub id).
    #[arg(long, short = 'm', default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// The adapter directory (PEFT layout).
    #[arg(long)]
    pub adapter: PathBuf,
    /// Output directory (must not exist or be empty).
    #[arg(long)]
    pub out: PathBuf,
    /// Largest shard in bytes.
    #[arg(long, default_value_t = DEFAULT_SHARD_BYTES)]
    pub shard_bytes: usize,
    /// Backend that computes the low-rank products.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
}

/// Runs `engram merge`.
pub fn run(a: MergeArgs) -> Result<()> {
    let device = device_from_name(&a.backend)?;
    let ckpt = Checkpoint::open_with(&a.model, &crate::progress::Bars::new(true))?;
    let adapter = load_adapter(&a.adapter)?;
    let shards = engram_lora::merge_to_hf(&ckpt, Some(&adapter), &a.out, a.shard_bytes, &device)?;
    eprintln!(
        "merged {} (rank {}, {} adapted layers) into {} → {} ({shards} shard{})",
        a.adapter.display(),
        adapter.config.rank,
        adapter.factors.len(),
        ckpt.origin,
        a.out.display(),
        if shards == 1 { "" } else { "s" }
    );
    Ok(())
}
