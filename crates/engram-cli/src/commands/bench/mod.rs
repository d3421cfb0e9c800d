//! `engram bench ...`: benchmarks that print figures, beside a peer's measured in the same run
//! where one exists. Kept apart from the main commands: the peers are Python child processes
//! ([`peer`]), measured with [`child`].

pub mod batches;
pub mod child;
pub mod corpus;
pub mod generate;
pub mod long_context;
pub mod peer;
pub mod phases;
pub mod random;
pub mod train;

use anyhow::Result;
use clap::Subcommand;

/// Benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Prefill and decode tokens/s of greedy generation, vs transformers on the same machine.
    Generate(generate::GenerateBenchArgs),
    /// LoRA training tokens/s, time per epoch and peak memory, vs PEFT on the same machine.
    Train(train::TrainBenchArgs),
    /// Long-context prefill with the shared-prefix KV cache vs per-question prompts.
    LongContext(long_context::LongContextBenchArgs),
    /// Padding share and distinct shapes of the trainer's batches, padded and packed.
    Batches(batches::BatchesBenchArgs),
    /// Documents/s reading a mail folder and deduplicating synthetic documents with MinHash.
    Corpus(corpus::CorpusBenchArgs),
}

/// Runs a benchmark.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Generate(a) => generate::run(a),
        BenchCommand::Train(a) => train::run(a),
        BenchCommand::LongContext(a) => long_context::run(a),
        BenchCommand::Batches(a) => batches::run(a),
        BenchCommand::Corpus(a) => corpus::run(a),
    }
}
