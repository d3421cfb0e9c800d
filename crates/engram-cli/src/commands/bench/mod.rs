//! `engram bench ...`: benchmarks that print figures, beside a peer's measured in the same run
//! where one exists. The arguments are here; the benchmarks are [`engram_bench`]'s, and their
//! lines are printed as they come ([`print_line`]).

pub mod generate;
pub mod long_context;
pub mod matmul;
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
    /// Each matrix product of one LoRA training step, timed on the device, vs torch's.
    Matmul(matmul::MatmulBenchArgs),
    /// Long-context prefill with the shared-prefix KV cache vs per-question prompts.
    LongContext(long_context::LongContextBenchArgs),
    /// Padding share and distinct shapes of the trainer's batches, padded and packed.
    Batches(engram_bench::BatchesBench),
    /// Documents/s reading a mail folder and deduplicating synthetic documents with MinHash.
    Corpus(engram_bench::CorpusBench),
}

/// Runs a benchmark.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Generate(a) => generate::run(a),
        BenchCommand::Train(a) => train::run(a),
        BenchCommand::Matmul(a) => matmul::run(a),
        BenchCommand::LongContext(a) => long_context::run(a),
        BenchCommand::Batches(a) => engram_bench::batches(&a, &mut print_line),
        BenchCommand::Corpus(a) => engram_bench::corpus(&a, &mut print_line),
    }
}

/// Prints one of a bench's lines.
pub fn print_line(line: &str) {
    println!("{line}");
}

/// The weight dtype `--dtype NAME` names, or an error that lists the choices.
pub fn weight_dtype(name: &str) -> Result<engram_model::WeightDType> {
    engram_model::WeightDType::parse(name)
        .ok_or_else(|| anyhow::anyhow!("--dtype {name}: f32, bf16 or f16"))
}

/// Writes a bench's figures as pretty JSON to `path`, when given.
pub fn write_json(path: Option<&std::path::Path>, v: &serde_json::Value) -> Result<()> {
    if let Some(path) = path {
        engram_io::write_file(path, serde_json::to_string_pretty(v)?.as_bytes())?;
    }
    Ok(())
}
