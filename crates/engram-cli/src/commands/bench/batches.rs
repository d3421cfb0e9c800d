//! `engram bench batches`: what the trainer's micro-batches occupy on the device, padded and
//! packed, for a fact set and a model's tokenizer ([`engram_bench::batches`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use engram_lora::TrainConfig;

use super::print_line;

/// Arguments of `engram bench batches`.
#[derive(Args, Debug)]
pub struct BatchesBenchArgs {
    /// Facts to lay out.
    #[arg(long, default_value = "tests/fixtures/facts/synthetic-500.jsonl")]
    pub facts: PathBuf,
    /// The model whose tokenizer counts the tokens (directory, .gguf, alias or hub id).
    #[arg(long, short = 'm', default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// A tokenizer directory instead of --model's (no weights needed).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Examples per micro-batch (default: the training default).
    #[arg(long, default_value_t = TrainConfig::default().batch_size)]
    pub batch: usize,
    /// Epochs (default: the training default).
    #[arg(long, default_value_t = TrainConfig::default().epochs)]
    pub epochs: usize,
    /// Seed of the batch order.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Slots per packed row (default: the longest example rounded up to 64).
    #[arg(long)]
    pub pack_length: Option<usize>,
}

/// Runs `engram bench batches`.
pub fn run(a: BatchesBenchArgs) -> Result<()> {
    let bench = engram_bench::BatchesBench {
        facts: a.facts,
        model: a.model,
        tokenizer: a.tokenizer,
        batch: a.batch,
        epochs: a.epochs,
        seed: a.seed,
        pack_length: a.pack_length,
    };
    engram_bench::batches(&bench, &mut print_line)
}
