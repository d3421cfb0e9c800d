//! `engram bench batches`: what the trainer's micro-batches occupy on the device, padded and
//! packed (`layout = "packed"`), for a fact set and a model's tokenizer — padding share and
//! distinct batch shapes over a run's epochs. Needs no weights: `--tokenizer` takes a directory
//! with `tokenizer.json` and `tokenizer_config.json` (e.g. Llama-3.1-8B-Instruct's, for
//! EnronQA-length examples).

use std::path::PathBuf;

use anyhow::{Context, Result};
use engram_checkpoint::{Checkpoint, TokenizerFiles};
use engram_facts::read_facts;
use engram_lora::BatchLayout;
use engram_lora::TrainConfig;
use engram_lora::{LayoutFigures, epoch_layout};
use engram_tokenizer::ChatTokenizer;

use crate::Out;

/// What `engram bench batches` lays out (its arguments).
#[derive(clap::Args, Debug)]
pub struct BatchesBench {
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

/// Lays out the facts' examples padded and packed; hands the figures to `out`.
pub fn batches(a: &BatchesBench, out: Out) -> Result<()> {
    let files = match &a.tokenizer {
        Some(dir) => TokenizerFiles::from_dir(dir)?,
        None => {
            Checkpoint::open(&a.model)
                .with_context(|| format!("opening --model {}", a.model))?
                .tokenizer
        }
    };
    let tok = ChatTokenizer::from_files(&files)?;
    let facts = read_facts(&a.facts)?;
    let examples = engram_lora::build_examples(&tok, &facts, usize::MAX)?;
    let mut lengths: Vec<usize> = examples.iter().map(|e| e.ids.len()).collect();
    let packed_cfg = TrainConfig {
        layout: BatchLayout::Packed,
        pack_length: a.pack_length,
        ..TrainConfig::default()
    };
    let longest = lengths.iter().copied().max().unwrap_or(0);
    let pack = packed_cfg
        .packed_rows(longest)
        .map_err(anyhow::Error::msg)?
        .expect("packed");
    let padded = epoch_layout(&lengths, a.batch, a.seed, a.epochs, None);
    let packed = epoch_layout(&lengths, a.batch, a.seed, a.epochs, Some(pack));
    lengths.sort_unstable();
    say!(
        out,
        "{} facts from {} ({} tokenizer): {}..{} tokens per example (median {}), batch {}, {} epochs, {} micro-batches",
        facts.len(),
        a.facts.display(),
        files.origin,
        lengths[0],
        longest,
        lengths[lengths.len() / 2],
        a.batch,
        a.epochs,
        padded.batches
    );
    say!(
        out,
        "{:<16}  {:>10}  {:>10}  {:>8}  {:>15}",
        "layout",
        "slots",
        "tokens",
        "padding",
        "distinct shapes"
    );
    let mut row = |name: &str, f: &LayoutFigures| {
        say!(
            out,
            "{name:<16}  {:>10}  {:>10}  {:>7.1} %  {:>15}",
            f.slots,
            f.tokens,
            100.0 * f.padding(),
            f.shapes.len()
        );
    };
    row("padded", &padded);
    row(&format!("packed ({pack})"), &packed);
    say!(
        out,
        "(padded: one row per example, as long as the batch's longest, batches length-grouped as the trainer's; packed: rows of {pack} slots, first-fit decreasing)"
    );
    Ok(())
}
