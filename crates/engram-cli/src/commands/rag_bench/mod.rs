//! `engram rag-bench`: the retrieval benchmark over a corpus's documents (EnronQA §5): each
//! fact's question retrieves from the documents, scored by where its source document lands —
//! Recall@k, NDCG@k and MRR per retriever — and, with `--beir DIR`, the benchmark written in
//! BEIR's layout with a TREC run per retriever; with `--real-queries FILE`, the generated
//! questions compared with real ones ([`real`]: scores side by side, cosine distributions, a
//! divergence figure and a plot); with `--reader`, reader accuracy over the retrieved documents
//! ([`reader`]).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use engram_baselines::rag::benchmark::{
    BenchDoc, BenchQuery, BenchRetriever, DEFAULT_KS, RetrieverScores, run_benchmark, write_beir,
};
use engram_baselines::rag::{BertEncoder, DEFAULT_ENCODER, query_plot};

use crate::progress::Bars;

mod reader;
mod real;

/// A retriever of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// BM25 over each document's title and text.
    Bm25,
    /// Cosine similarity of a BERT sentence encoder's embeddings (--encoder).
    Dense,
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
    let (documents, unfiltered) = engram_qa::corpus_documents(&a.corpus)?;
    let docs: Vec<BenchDoc> = documents
        .into_iter()
        .map(|d| BenchDoc {
            id: d.id,
            title: d.title,
            text: d.text,
        })
        .collect();
    let index: HashMap<&str, usize> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.id.as_str(), i))
        .collect();
    let facts = engram_facts::read_facts(&a.facts)?;
    let mut queries = Vec::with_capacity(facts.len());
    for f in &facts {
        let Some(source) = &f.source else {
            bail!(
                "{}: fact {} names no source document; the benchmark needs facts from `engram qa generate`",
                a.facts.display(),
                f.id
            );
        };
        let Some(&relevant) = index.get(source.as_str()) else {
            bail!(
                "{}: fact {}'s source {source} is not among the {} documents of {}",
                a.facts.display(),
                f.id,
                docs.len(),
                a.corpus.display()
            );
        };
        queries.push(BenchQuery {
            id: f.id.clone(),
            text: match a.questions {
                Asked::Original => f.question.clone(),
                Asked::Rephrased => f.rephrased_question.clone(),
            },
            relevant,
        });
    }
    let real = match &a.real_queries {
        Some(path) => Some(real::load(path, &index, &a.corpus)?),
        None => None,
    };
    let bars = Bars::new(true);
    let mut retrievers = a.retrievers.clone();
    retrievers.dedup();
    let needs_encoder = real.is_some() || retrievers.contains(&Which::Dense);
    let encoder = match needs_encoder {
        true => Some(load_encoder(&a, &bars)?),
        false => None,
    };
    let score = |qs: &[BenchQuery]| -> Result<Vec<RetrieverScores>> {
        let mut scores = Vec::new();
        for r in &retrievers {
            let which = match r {
                Which::Bm25 => BenchRetriever::Bm25,
                Which::Dense => {
                    BenchRetriever::Dense(&a.encoder, encoder.as_ref().expect("loaded"))
                }
            };
            scores.push(run_benchmark(&docs, qs, &a.k, which, &bars)?);
        }
        Ok(scores)
    };
    let scores = score(&queries)?;
    println!(
        "{} questions over {} documents{}",
        queries.len(),
        docs.len(),
        if unfiltered { " (not filtered)" } else { "" }
    );
    print_scores(&scores, "");
    let mut report = serde_json::json!({ "generated": scores });
    if let Some(real) = &real {
        let encoder = encoder.as_ref().expect("loaded");
        let with_docs = real.with_documents();
        let real_scores = match with_docs.is_empty() {
            true => Vec::new(),
            false => score(&with_docs)?,
        };
        if !real_scores.is_empty() {
            println!(
                "{} real queries that name their document, over the same documents",
                with_docs.len()
            );
            print_scores(&real_scores, " (real)");
        }
        let cmp = real::compare(encoder, &docs, &queries, real)?;
        for line in real::describe(&cmp) {
            println!("{line}");
        }
        engram_io::write_file(&a.plot, query_plot::svg(&cmp).as_bytes())?;
        println!("plot → {}", a.plot.display());
        report["real"] = serde_json::to_value(&real_scores)?;
        report["comparison"] = serde_json::to_value(&cmp)?;
    }
    if let Some(value) = &a.reader {
        let answers: Vec<String> = facts.iter().map(|f| f.answer.clone()).collect();
        let r = reader::run(&a, value, &docs, &queries, &answers, &scores, &bars)?;
        report["reader"] = serde_json::to_value(&r)?;
    }
    if let Some(dir) = &a.beir {
        write_beir(dir, &docs, &queries, &scores)?;
        println!("BEIR layout and TREC runs → {}", dir.display());
    }
    if let Some(out) = &a.out {
        engram_io::write_file(out, &serde_json::to_vec_pretty(&report)?)?;
        println!("scores → {}", out.display());
    }
    Ok(())
}

/// The sentence encoder `--encoder` names, on `--backend`.
fn load_encoder(a: &RagBenchArgs, bars: &Bars) -> Result<BertEncoder> {
    let device = engram_model::device::open_device(&a.backend)?;
    let dir = engram_checkpoint::model_store::model_dir(&a.encoder, bars)
        .with_context(|| format!("--encoder {}", a.encoder))?;
    Ok(BertEncoder::load(&dir, &device)?)
}

/// The scores as a table, `suffix` after each retriever's name.
fn print_scores(scores: &[RetrieverScores], suffix: &str) {
    let Some(first) = scores.first() else { return };
    let mut head = format!("{:<34}", "retriever");
    for m in &first.metrics {
        head.push_str(&format!(" {:>8}", format!("R@{}", m.k)));
    }
    for m in &first.metrics {
        head.push_str(&format!(" {:>8}", format!("NDCG@{}", m.k)));
    }
    head.push_str(&format!(" {:>7} {:>8}", "MRR", "seconds"));
    println!("{head}");
    for s in scores {
        let mut line = format!("{:<34}", format!("{}{suffix}", s.retriever));
        for m in &s.metrics {
            line.push_str(&format!(" {:>8.3}", m.recall));
        }
        for m in &s.metrics {
            line.push_str(&format!(" {:>8.3}", m.ndcg));
        }
        line.push_str(&format!(" {:>7.3} {:>8.1}", s.mrr, s.seconds));
        println!("{line}");
    }
}
