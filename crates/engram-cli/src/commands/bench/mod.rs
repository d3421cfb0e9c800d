//! `engram bench ...`: benchmarks that print figures, beside a peer's measured in the same run
//! where one exists. Kept apart from the main commands: the peers are Python child processes
//! ([`peer`]), measured with [`child`].

pub mod batches;
pub mod child;
pub mod corpus;
pub mod figures;
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

/// What a figure was measured with: the build profile, the CPU model, its SIMD features and
/// the threads, in one line (figures from another build or machine are not comparable).
pub fn machine_line() -> String {
    let profile = if cfg!(debug_assertions) {
        "dev (engram's crates at opt-level 1, dependencies and kernels at 3)"
    } else {
        "release"
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let mut simd = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        for (name, on) in [
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
            ("f16c", std::arch::is_x86_feature_detected!("f16c")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            (
                "avx512vnni",
                std::arch::is_x86_feature_detected!("avx512vnni"),
            ),
        ] {
            if on {
                simd.push(name);
            }
        }
    }
    format!(
        "build {profile}; CPU {cpu} ({} threads; SIMD: {})",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if simd.is_empty() {
            "none".to_string()
        } else {
            simd.join(" ")
        }
    )
}
