//! `engram bench long-context`: prefill work and time of the long-context baseline with the
//! shared-prefix KV cache vs per-question prompts ([`engram_bench::long_context`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use engram_bench::LongContextBench;

use super::print_line;
use crate::loaded::ModelArgs;
use crate::progress::Bars;

/// Arguments of `engram bench long-context`.
#[derive(Args, Debug)]
pub struct LongContextBenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Facts to put in context.
    #[arg(long, default_value = "tests/fixtures/facts/synthetic-500.jsonl")]
    pub facts: PathBuf,
    /// Facts in context (default: as many as fit the window, at most 1000).
    #[arg(long)]
    pub count: Option<usize>,
    /// Questions answered (the first N facts' original questions).
    #[arg(long, default_value_t = 16)]
    pub questions: usize,
    /// Questions per generation batch.
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// New tokens per answer.
    #[arg(long, default_value_t = 16)]
    pub max_new_tokens: usize,
}

/// Runs `engram bench long-context`.
pub fn run(a: LongContextBenchArgs) -> Result<()> {
    let loaded = a.model.load()?;
    let bench = LongContextBench {
        backend: a.model.backend,
        facts: a.facts,
        count: a.count,
        questions: a.questions,
        batch_size: a.batch_size,
        max_new_tokens: a.max_new_tokens,
    };
    engram_bench::long_context(&loaded, &bench, &Bars::new(true), &mut print_line)
}
