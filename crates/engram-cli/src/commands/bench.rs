//! `engram bench ...`: benchmarks that print figures, beside a peer's measured in the same run.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use engram_model::{GenerationConfig, Sampling, generate};
use engram_tokenizer::Message;

use crate::loaded::ModelArgs;

/// Benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Prefill and decode tokens/s of greedy generation, vs transformers on the same machine.
    Generate(GenerateBenchArgs),
    /// LoRA training tokens/s, time per epoch and peak memory, vs PEFT on the same machine.
    Train(crate::commands::bench_train::TrainBenchArgs),
    /// Long-context prefill with the shared-prefix KV cache vs per-question prompts.
    LongContext(crate::commands::bench_long_context::LongContextBenchArgs),
}

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
    /// Python with torch + transformers + gguf for the peer run (`none` to skip).
    #[arg(long, env = "ENGRAM_PEER_PYTHON", default_value = "python3")]
    pub peer_python: String,
    /// Threads for the peer (engram's CPU backend uses every core).
    #[arg(long, default_value_t = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))]
    pub threads: usize,
}

const QUESTIONS: [&str; 16] = [
    "What is the capital of France?",
    "Who wrote the novel Pride and Prejudice?",
    "Explain in one sentence what a pipeline is.",
    "What time is the budget meeting on Tuesday?",
    "Name three colors.",
    "How many days are in a leap year?",
    "What does an energy trader do?",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 12?",
    "Why is the sky blue?",
    "Give me a synonym for happy.",
    "Where is Houston located?",
    "What is a derivative contract?",
    "Summarize the plot of Hamlet in one sentence.",
    "Which planet is closest to the sun?",
    "What is the boiling point of water in Celsius?",
];

#[derive(Debug, Clone, Copy)]
struct Figures {
    prefill_tokens: usize,
    prefill_secs: f64,
    decode_tokens: usize,
    decode_secs: f64,
}

impl Figures {
    fn prefill_tps(&self) -> f64 {
        self.prefill_tokens as f64 / self.prefill_secs
    }
    fn decode_tps(&self) -> f64 {
        self.decode_tokens as f64 / self.decode_secs
    }
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Generate(a) => generate_bench(a),
        BenchCommand::Train(a) => crate::commands::bench_train::run(a),
        BenchCommand::LongContext(a) => crate::commands::bench_long_context::run(a),
    }
}

fn generate_bench(args: GenerateBenchArgs) -> Result<()> {
    let loaded = args.model.load()?;
    let tok = &loaded.tokenizer;
    let mut batches = Vec::new();
    for &b in &args.batch {
        let prompts: Vec<Vec<u32>> = (0..b)
            .map(|i| tok.encode_chat_prompt(&[Message::user(QUESTIONS[i % QUESTIONS.len()])]))
            .collect::<std::result::Result<_, _>>()?;
        batches.push(prompts);
    }
    let mut ours = Vec::new();
    for prompts in &batches {
        let cfg = GenerationConfig {
            max_new_tokens: args.new_tokens,
            sampling: Sampling::Greedy,
            stop_ids: vec![],
        };
        let _ = generate(
            &loaded.model,
            &prompts[..1],
            &GenerationConfig {
                max_new_tokens: 2,
                ..cfg.clone()
            },
        )?;
        let mut best: Option<Figures> = None;
        for _ in 0..args.repeats.max(1) {
            let g = generate(&loaded.model, prompts, &cfg)?;
            let f = Figures {
                prefill_tokens: g.prefill_tokens,
                prefill_secs: g.prefill_secs,
                decode_tokens: g.decode_tokens,
                decode_secs: g.decode_secs,
            };
            best = Some(match best {
                Some(b) => Figures {
                    prefill_secs: b.prefill_secs.min(f.prefill_secs),
                    decode_secs: b.decode_secs.min(f.decode_secs),
                    ..f
                },
                None => f,
            });
        }
        ours.push(best.expect("at least one repeat"));
    }
    let peer = peer_figures(&args, &loaded.origin, &batches);
    println!(
        "engram bench generate: {} on {} ({} dtype), {} new tokens, greedy, best of {}",
        loaded.origin, args.model.backend, args.model.dtype, args.new_tokens, args.repeats
    );
    println!(
        "{:>5}  {:>14} {:>14}  {:>14} {:>14}  {:>8} {:>8}",
        "batch", "prefill tok/s", "decode tok/s", "hf prefill", "hf decode", "prefill×", "decode×"
    );
    for (i, f) in ours.iter().enumerate() {
        let b = args.batch[i];
        match peer.as_ref().ok().and_then(|p| p.get(i)) {
            Some(p) => println!(
                "{b:>5}  {:>14.1} {:>14.1}  {:>14.1} {:>14.1}  {:>7.2}x {:>7.2}x",
                f.prefill_tps(),
                f.decode_tps(),
                p.prefill_tps(),
                p.decode_tps(),
                f.prefill_tps() / p.prefill_tps(),
                f.decode_tps() / p.decode_tps()
            ),
            None => println!(
                "{b:>5}  {:>14.1} {:>14.1}  {:>14} {:>14}",
                f.prefill_tps(),
                f.decode_tps(),
                "-",
                "-"
            ),
        }
    }
    if let Err(e) = peer {
        println!("transformers peer not measured: {e:#}");
    } else {
        println!(
            "(× = engram / transformers; transformers ran with {} threads)",
            args.threads
        );
    }
    Ok(())
}

fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/hf_generate_bench.py")
}

fn peer_figures(
    args: &GenerateBenchArgs,
    origin: &str,
    batches: &[Vec<Vec<u32>>],
) -> Result<Vec<Figures>> {
    if args.peer_python == "none" {
        anyhow::bail!("skipped (--peer-python none)");
    }
    // The peer reads the same GGUF file.
    let path = origin
        .rsplit_once(" (")
        .map(|(_, p)| p.trim_end_matches(')'))
        .unwrap_or(origin);
    if !path.ends_with(".gguf") {
        anyhow::bail!("the transformers peer is wired for GGUF models only ({path})");
    }
    let dir = tempfile::tempdir()?;
    let spec = dir.path().join("prompts.json");
    std::fs::write(
        &spec,
        serde_json::json!({"batches": batches, "new_tokens": args.new_tokens}).to_string(),
    )?;
    let out = Command::new(&args.peer_python)
        .arg(peer_script())
        .arg(path)
        .arg(&spec)
        .args([
            "--threads",
            &args.threads.to_string(),
            "--repeats",
            &args.repeats.to_string(),
        ])
        .output()
        .with_context(|| format!("running {}", args.peer_python))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        anyhow::bail!("{} exited with {}: {last}", args.peer_python, out.status);
    }
    let mut figs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        figs.push(Figures {
            prefill_tokens: v["prefill_tokens"].as_u64().unwrap_or(0) as usize,
            prefill_secs: v["prefill_secs"].as_f64().unwrap_or(f64::NAN),
            decode_tokens: v["decode_tokens"].as_u64().unwrap_or(0) as usize,
            decode_secs: v["decode_secs"].as_f64().unwrap_or(f64::NAN),
        });
    }
    Ok(figs)
}
