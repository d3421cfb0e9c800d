//! `engram rag-bench`: the retrieval benchmark over a corpus's documents (EnronQA §5): each
//! fact's question retrieves from the documents, scored by where its source document lands —
//! Recall@k, NDCG@k and MRR per retriever — and, with `--beir DIR`, the benchmark written in
//! BEIR's layout with a TREC run per retriever; with `--real-queries FILE`, the generated
//! questions compared with real ones ([`real`]: scores side by side, cosine distributions, a
//! divergence figure and a plot); with `--reader`, reader accuracy over the retrieved documents
//! ([`reader`] builds the reader and its judge). The benchmark is [`engram_bench::rag_bench`].

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use engram_baselines::rag::DEFAULT_ENCODER;
use engram_baselines::rag::benchmark::DEFAULT_KS;
use engram_bench::RagBench;

use super::bench::print_line;
use crate::progress::Bars;
use crate::signals;

mod reader;

/// A retriever of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// BM25 over each document's title and text.
    Bm25,
    /// Cosine similarity of a BERT sentence encoder's embeddings (--encoder).
    Dense,
}

impl Which {
    /// The library's retriever.
    fn which(self) -> engram_bench::Which {
        match self {
            Which::Bm25 => engram_bench::Which::Bm25,
            Which::Dense => engram_bench::Which::Dense,
        }
    }
}

/// Which question of each fact is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Asked {
    /// The original question (as the table tests).
    Original,
    /// The rephrased question.
    Rephrased,
}

/// Arguments of `engram rag-bench`.
#[derive(Args, Debug)]
pub struct RagBenchArgs {
    /// The corpus directory (its kept documents; every document when never filtered).
    pub corpus: PathBuf,
    /// Facts whose `source` names a document of the corpus (from `engram qa generate`).
    #[arg(long)]
    pub facts: PathBuf,
    /// Retrievers to score.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "bm25,dense")]
    pub retrievers: Vec<Which>,
    /// Cut-offs.
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_KS)]
    pub k: Vec<usize>,
    /// Which question of each fact is asked.
    #[arg(long, value_enum, default_value = "original")]
    pub questions: Asked,
    /// Sentence encoder for the dense retriever: a registry alias or an HF directory.
    #[arg(long, default_value = DEFAULT_ENCODER)]
    pub encoder: String,
    /// Backend of the encoder: cpu, wgpu, cuda[:N], auto.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Write the benchmark in BEIR's layout (corpus.jsonl, queries.jsonl, qrels/test.tsv) with
    /// a TREC run file per retriever (runs/) to this directory.
    #[arg(long)]
    pub beir: Option<PathBuf>,
    /// Write the scores as JSON to this file (`generated`: per retriever; with --real-queries
    /// also `real` and `comparison`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Real queries to compare the generated ones with (Chroma's generative benchmarking):
    /// JSONL, `{"query": "...", "document": "<corpus id>"}` a line (`question`/`source` read
    /// too; the document optional). Needs the dense encoder (--encoder).
    #[arg(long)]
    pub real_queries: Option<PathBuf>,
    /// Where the comparison's plot goes (SVG), with --real-queries.
    #[arg(long, default_value = "query-comparison.svg")]
    pub plot: PathBuf,
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
    let mut retrievers = a.retrievers.clone();
    retrievers.dedup();
    let bench = RagBench {
        corpus: a.corpus,
        facts: a.facts,
        retrievers: retrievers.into_iter().map(Which::which).collect(),
        k: a.k,
        questions: match a.questions {
            Asked::Original => engram_bench::Asked::Original,
            Asked::Rephrased => engram_bench::Asked::Rephrased,
        },
        encoder: a.encoder,
        backend: a.backend,
        beir: a.beir,
        out: a.out,
        real_queries: a.real_queries,
        plot: a.plot,
    };
    let stop = signals::install()?;
    let outcome = engram_bench::rag_bench(&bench, reader.as_ref(), &bars, &stop, &mut print_line)?;
    for note in outcome.judge_notes {
        eprintln!("{note}");
    }
    Ok(())
}
