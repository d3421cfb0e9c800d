//! `engram bench long-context`: prefill work and time of the long-context baseline with the
//! shared-prefix KV cache vs per-question prompts ([`engram_bench::long_context`]).

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
    #[command(flatten)]
    pub bench: LongContextBench,
}

/// Runs `engram bench long-context`.
pub fn run(a: LongContextBenchArgs) -> Result<()> {
    let loaded = a.model.load()?;
    let bench = LongContextBench {
        backend: a.model.backend,
        ..a.bench
    };
    engram_bench::long_context(&loaded, &bench, &Bars::new(true), &mut print_line)
}
