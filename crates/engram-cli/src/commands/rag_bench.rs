//! `engram rag-bench`: the retrieval benchmark over a corpus's documents (EnronQA §5): each
//! fact's question retrieves from the documents, scored by where its source document lands —
//! Recall@k, NDCG@k and MRR per retriever — and, with `--beir DIR`, the benchmark written in
//! BEIR's layout with a TREC run per retriever.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use engram_baselines::rag::benchmark::{
    BenchDoc, BenchQuery, BenchRetriever, DEFAULT_KS, RetrieverScores, run_benchmark, write_beir,
};
use engram_baselines::rag::{BertEncoder, DEFAULT_ENCODER};

use crate::progress::Bars;

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
    /// Write the scores as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
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
    let bars = Bars::new(true);
    let mut scores: Vec<RetrieverScores> = Vec::new();
    let mut retrievers = a.retrievers.clone();
    retrievers.dedup();
    for r in retrievers {
        let s = match r {
            Which::Bm25 => run_benchmark(&docs, &queries, &a.k, BenchRetriever::Bm25, &bars)?,
            Which::Dense => {
                let device = engram_model::device::open_device(&a.backend)?;
                let dir = engram_checkpoint::model_store::model_dir(&a.encoder, &bars)
                    .with_context(|| format!("--encoder {}", a.encoder))?;
                let encoder = BertEncoder::load(&dir, &device)?;
                run_benchmark(
                    &docs,
                    &queries,
                    &a.k,
                    BenchRetriever::Dense(&a.encoder, &encoder),
                    &bars,
                )?
            }
        };
        scores.push(s);
    }
    println!(
        "{} questions over {} documents{}",
        queries.len(),
        docs.len(),
        if unfiltered { " (not filtered)" } else { "" }
    );
    print_scores(&scores);
    if let Some(dir) = &a.beir {
        write_beir(dir, &docs, &queries, &scores)?;
        println!("BEIR layout and TREC runs → {}", dir.display());
    }
    if let Some(out) = &a.out {
        engram_io::write_file(out, &serde_json::to_vec_pretty(&scores)?)?;
        println!("scores → {}", out.display());
    }
    Ok(())
}

fn print_scores(scores: &[RetrieverScores]) {
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
        let mut line = format!("{:<34}", s.retriever);
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
