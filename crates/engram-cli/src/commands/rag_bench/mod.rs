//! `engram rag-bench`: the retrieval benchmark over a corpus's documents (EnronQA §5): each
//! fact's question retrieves from the documents, scored by where its source document lands —
//! Recall@k, NDCG@k and MRR per retriever — and, with `--beir DIR`, the benchmark written in
//! BEIR's layout with a TREC run per retriever; with `--real-queries FILE`, the generated
//! questions compared with real ones ([`real`]: scores side by side, cosine distributions, a
//! divergence figure and a plot); with `--reader`, reader accuracy over the retrieved documents
//! ([`reader`] builds the reader and its judge). The benchmark is [`engram_bench::rag_bench`].

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use engram_bench::RagBench;

use super::bench::print_line;
use crate::progress::Bars;
use crate::signals;

mod reader;

/// Arguments of `engram rag-bench`.
#[derive(Args, Debug)]
pub struct RagBenchArgs {
    #[command(flatten)]
    pub bench: RagBench,
    /// Reader accuracy (EnronQA Table 4's shape): answer each question closed-book, from each
    /// retriever's top --reader-k documents and from its own document (oracle) with this
    /// model — an OpenAI-compatible base URL, or local:MODEL run here — and judge the answers
    /// against the facts' answers (--judge).
    #[arg(long)]
    pub reader: Option<String>,
    /// The reader's model name at its endpoint.
    #[arg(long)]
    pub reader_model: Option<String>,
    /// Environment variable holding the reader endpoint's API key (never logged or written).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Documents shown to the reader, per retriever (each value a condition).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub reader_k: Vec<usize>,
    /// Most tokens of a reader's answer.
    #[arg(long, default_value_t = engram_qa::DEFAULT_READER_MAX_TOKENS)]
    pub reader_max_tokens: usize,
    /// The reader's call cache (default: reader-cache/ in the corpus directory).
    #[arg(long)]
    pub reader_cache: Option<PathBuf>,
    /// The judge of the reader's answers: exact-match, token-f1, gold-recall or a preset file.
    #[arg(long)]
    pub judge: Option<String>,
    /// The prompt directory (reader.txt, closed_book.txt).
    #[arg(long, default_value = "configs/qa")]
    pub prompts: PathBuf,
}

/// Runs `engram rag-bench`.
pub fn run(a: RagBenchArgs) -> Result<()> {
    let bars = Bars::new(true);
    let reader = match &a.reader {
        Some(value) => Some(reader::build(&a, value, &bars)?),
        None => None,
    };
    let stop = signals::install()?;
    let outcome =
        engram_bench::rag_bench(&a.bench, reader.as_ref(), &bars, &stop, &mut print_line)?;
    for note in outcome.judge_notes {
        eprintln!("{note}");
    }
    Ok(())
}
