//! `engram bench generate`: greedy prefill and decode tokens/s, beside transformers' and
//! llama.cpp's on the same machine and GGUF file, measured in the same run
//! ([`engram_bench::generate`]), or of an architecture with random weights
//! ([`engram_bench::random_generate`]).

use anyhow::Result;
use clap::Args;
use engram_bench::{GenerateBench, Peer, RandomGenerate};

use crate::loaded::{MatmulArg, ModelArgs};

use super::{print_line, weight_dtype, write_json};

/// Arguments of `engram bench generate`.
#[derive(Args, Debug)]
pub struct GenerateBenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Batch sizes to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    pub batch: Vec<usize>,
    /// New tokens per row (no early stop).
    #[arg(long, default_value_t = 32)]
    pub new_tokens: usize,
    /// Timed repetitions (the best is kept).
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// Python for the peers: torch + transformers + gguf for transformers, xllamacpp for
    /// llama.cpp (`none` to skip both).
    #[arg(long, env = "ENGRAM_PEER_PYTHON", default_value = "python3")]
    pub peer_python: String,
    /// Peers measured on the same file in the same run (a peer whose Python package is missing
    /// is reported as not measured).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "transformers,llama.cpp"
    )]
    pub peer: Vec<Peer>,
    /// Threads for the peers (engram's CPU backend uses every core).
    #[arg(long, default_value_t = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))]
    pub threads: usize,
    /// Benchmark this architecture (an HF config.json) instead of --model, with random weights
    /// drawn on the device and random prompts (no peer).
    #[arg(long, requires = "random_weights")]
    pub architecture: Option<std::path::PathBuf>,
    /// Random weights drawn on the device (with --architecture).
    #[arg(long, requires = "architecture")]
    pub random_weights: bool,
    /// Prompt tokens per row: with --random-weights, random ids (default 64); with a model, a
    /// long user turn of real sentences of at least this many tokens ending in the row's
    /// question (default: the question alone, ~40 tokens) — e.g. 2048 for a long-prompt prefill.
    #[arg(long)]
    pub prompt_len: Option<usize>,
    /// Also write the figures as JSON to this file (with --random-weights).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// How quantized (GGUF block) weights are multiplied on the CPU, each measured in turn:
    /// `exact` (the blocks dequantized to f32: transformers' numbers) and `q8` (activations
    /// quantized to Q8 blocks, integer dot products: llama.cpp's way; faster at batch 1, but its
    /// greedy tokens drift from exact ones: an experiment).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "exact")]
    pub matmul: Vec<MatmulArg>,
}

/// Prompt tokens per row of `--random-weights` runs unless `--prompt-len` says otherwise.
const RANDOM_PROMPT_LEN: usize = 64;

/// Runs `engram bench generate`.
pub fn run(args: GenerateBenchArgs) -> Result<()> {
    if let Some(arch) = &args.architecture {
        let dtype = weight_dtype(&args.model.dtype)?;
        let v = engram_bench::random_generate(
            &RandomGenerate {
                architecture: arch,
                backend: &args.model.backend,
                dtype,
                batches: &args.batch,
                prompt_len: args.prompt_len.unwrap_or(RANDOM_PROMPT_LEN),
                new_tokens: args.new_tokens,
            },
            &mut print_line,
        )?;
        return write_json(args.json.as_deref(), &v);
    }
    let loaded = args.model.load()?;
    let bench = GenerateBench {
        backend: args.model.backend,
        dtype: args.model.dtype,
        batch: args.batch,
        new_tokens: args.new_tokens,
        repeats: args.repeats,
        peer_python: args.peer_python,
        peers: args.peer,
        threads: args.threads,
        prompt_len: args.prompt_len.unwrap_or(0),
        modes: args.matmul.into_iter().map(MatmulArg::mode).collect(),
    };
    engram_bench::generate(&loaded, &bench, &mut print_line)
}
