//! `engram rag-bench`: the retrieval benchmark over a corpus's documents (EnronQA §5): each
//! fact's question retrieves from the documents, scored by where its source document lands —
//! Recall@k, NDCG@k and MRR per retriever — and, with `--beir DIR`, the benchmark written in
//! BEIR's layout with a TREC run per retriever; with `--real-queries FILE`, the generated
//! questions compared with real ones ([`real`]: scores side by side, cosine distributions, a
//! divergence figure and a plot); with a reader, reader accuracy over the retrieved documents
//! ([`ReaderBench`]).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use engram_baselines::rag::benchmark::DEFAULT_KS;
use engram_baselines::rag::benchmark::{
    BenchDoc, BenchQuery, BenchRetriever, RetrieverScores, run_benchmark, write_beir,
};
use engram_baselines::rag::{BertEncoder, DEFAULT_ENCODER, query_plot};
use engram_facts::Asked;

use engram_io::{Progress, Stop};

use crate::Out;
pub use reader::{ReaderBench, check_reader_k};

mod reader;
mod real;

/// A retriever of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// BM25 over each document's title and text.
    Bm25,
    /// Cosine similarity of a BERT sentence encoder's embeddings (--encoder).
    Dense,
}

/// What `engram rag-bench` scores (its arguments, besides the reader's).
#[derive(clap::Args, Debug)]
pub struct RagBench {
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
}

/// What came of a benchmark: the scores (as written to `out`) and the judge's notes.
pub struct RagOutcome {
    /// `generated` per retriever; `real` and `comparison` with real queries; `reader`.
    pub report: serde_json::Value,
    /// What the reader's judge has to say (to show on stderr).
    pub judge_notes: Vec<String>,
}

/// Scores each retriever over the corpus with the facts' questions (and, with `reader`, the
/// reader's accuracy over what they retrieved); hands the tables to `out`.
pub fn rag_bench(
    a: &RagBench,
    reader: Option<&ReaderBench>,
    progress: &dyn Progress,
    stop: &Stop,
    out: Out,
) -> Result<RagOutcome> {
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
            text: f.asked(a.questions).to_string(),
            relevant,
        });
    }
    let real = match &a.real_queries {
        Some(path) => Some(real::load(path, &index, &a.corpus)?),
        None => None,
    };
    let mut retrievers = a.retrievers.clone();
    retrievers.dedup();
    let needs_encoder = real.is_some() || retrievers.contains(&Which::Dense);
    let encoder = match needs_encoder {
        true => Some(load_encoder(a, progress)?),
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
            scores.push(run_benchmark(&docs, qs, &a.k, which, progress)?);
        }
        Ok(scores)
    };
    let scores = score(&queries)?;
    say!(
        out,
        "{} questions over {} documents{}",
        queries.len(),
        docs.len(),
        if unfiltered { " (not filtered)" } else { "" }
    );
    print_scores(out, &scores, "");
    let mut report = serde_json::json!({ "generated": scores });
    if let Some(real) = &real {
        let encoder = encoder.as_ref().expect("loaded");
        let with_docs = real.with_documents();
        let real_scores = match with_docs.is_empty() {
            true => Vec::new(),
            false => score(&with_docs)?,
        };
        if !real_scores.is_empty() {
            say!(
                out,
                "{} real queries that name their document, over the same documents",
                with_docs.len()
            );
            print_scores(out, &real_scores, " (real)");
        }
        let cmp = real::compare(encoder, &docs, &queries, real)?;
        for line in real::describe(&cmp) {
            say!(out, "{line}");
        }
        engram_io::write_file(&a.plot, query_plot::svg(&cmp).as_bytes())?;
        say!(out, "plot → {}", a.plot.display());
        report["real"] = serde_json::to_value(&real_scores)?;
        report["comparison"] = serde_json::to_value(&cmp)?;
    }
    let mut judge_notes = Vec::new();
    if let Some(r) = reader {
        let answers: Vec<String> = facts.iter().map(|f| f.answer.clone()).collect();
        let deepest = a.k.iter().copied().max().unwrap_or(0);
        let (scores, notes) = r.run(
            deepest, &docs, &queries, &answers, &scores, progress, stop, out,
        )?;
        report["reader"] = serde_json::to_value(&scores)?;
        judge_notes = notes;
    }
    if let Some(dir) = &a.beir {
        write_beir(dir, &docs, &queries, &scores)?;
        say!(out, "BEIR layout and TREC runs → {}", dir.display());
    }
    if let Some(path) = &a.out {
        engram_io::write_file(path, &serde_json::to_vec_pretty(&report)?)?;
        say!(out, "scores → {}", path.display());
    }
    Ok(RagOutcome {
        report,
        judge_notes,
    })
}

/// The sentence encoder `a.encoder` names, on `a.backend`.
fn load_encoder(a: &RagBench, progress: &dyn Progress) -> Result<BertEncoder> {
    let device = engram_model::device::open_device(&a.backend)?;
    let dir = engram_checkpoint::model_store::model_dir(&a.encoder, progress)
        .with_context(|| format!("--encoder {}", a.encoder))?;
    Ok(BertEncoder::load(&dir, &device)?)
}

/// The scores as a table, `suffix` after each retriever's name.
fn print_scores(out: Out, scores: &[RetrieverScores], suffix: &str) {
    let Some(first) = scores.first() else { return };
    let mut head = format!("{:<34}", "retriever");
    for m in &first.metrics {
        head.push_str(&format!(" {:>8}", format!("R@{}", m.k)));
    }
    for m in &first.metrics {
        head.push_str(&format!(" {:>8}", format!("NDCG@{}", m.k)));
    }
    head.push_str(&format!(" {:>7} {:>8}", "MRR", "seconds"));
    say!(out, "{head}");
    for s in scores {
        let mut line = format!("{:<34}", format!("{}{suffix}", s.retriever));
        for m in &s.metrics {
            line.push_str(&format!(" {:>8.3}", m.recall));
        }
        for m in &s.metrics {
            line.push_str(&format!(" {:>8.3}", m.ndcg));
        }
        line.push_str(&format!(" {:>7.3} {:>8.1}", s.mrr, s.seconds));
        say!(out, "{line}");
    }
}
