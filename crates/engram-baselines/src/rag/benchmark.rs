//! The retrieval benchmark over documents (EnronQA §5, Chroma's generative benchmarking): each
//! question retrieves from the whole corpus — documents, not facts — and is scored by where its
//! source document lands: Recall@k and NDCG@k (one relevant document per question; the metrics
//! of [`crate::rag::metrics`], checked against pytrec_eval) and MRR, per retriever. The
//! benchmark can be written out in BEIR's layout ([`write_beir`]) with a TREC run file per
//! retriever, so other tools can run or score it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use engram_io::Progress;
use serde::{Deserialize, Serialize};

use crate::error::{BaselineError, Result};
use crate::rag::bert::BertEncoder;
use crate::rag::bm25::Bm25Index;
use crate::rag::dense::DenseIndex;
use crate::rag::metrics::{RetrievalMetrics, retrieval_metrics};

/// Cut-offs reported by default (EnronQA Table 3, plus 100 as the RAG baseline retrieves).
pub const DEFAULT_KS: [usize; 4] = [1, 5, 10, 100];

/// A document of the benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchDoc {
    /// Its id (the corpus id).
    pub id: String,
    /// Its title (an email's subject), if any.
    pub title: Option<String>,
    /// Its text.
    pub text: String,
}

impl BenchDoc {
    /// What the retrievers index: title and text.
    pub fn indexed(&self) -> String {
        match &self.title {
            Some(t) => format!("{t}\n{}", self.text),
            None => self.text.clone(),
        }
    }
}

/// A question of the benchmark and the document that answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchQuery {
    /// Its id (the fact id).
    pub id: String,
    /// The question.
    pub text: String,
    /// Index of its source document.
    pub relevant: usize,
}

/// One retriever's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrieverScores {
    /// `bm25`, or `dense:<encoder>`.
    pub retriever: String,
    /// Recall and NDCG at each cut-off.
    pub metrics: Vec<RetrievalMetrics>,
    /// Mean reciprocal rank of the source document (0 where it is past the deepest cut-off).
    pub mrr: f64,
    /// Seconds to index the corpus and rank every question.
    pub seconds: f64,
    /// Each question's ranking (document indices, best first, as deep as the deepest cut-off).
    #[serde(skip)]
    pub rankings: Vec<Vec<usize>>,
}

/// Which retriever.
#[derive(Clone, Copy)]
pub enum BenchRetriever<'a> {
    /// BM25 over title and text.
    Bm25,
    /// Cosine similarity of this encoder's embeddings (a name for the results, the encoder).
    Dense(&'a str, &'a BertEncoder),
}

fn check(docs: &[BenchDoc], queries: &[BenchQuery], ks: &[usize]) -> Result<()> {
    if docs.is_empty() {
        return Err(BaselineError::Bad("the benchmark has no documents".into()));
    }
    if queries.is_empty() {
        return Err(BaselineError::Bad("the benchmark has no questions".into()));
    }
    if ks.is_empty() || ks.contains(&0) {
        return Err(BaselineError::Bad(format!(
            "cut-offs must be at least 1 (got {ks:?})"
        )));
    }
    if let Some(q) = queries.iter().find(|q| q.relevant >= docs.len()) {
        return Err(BaselineError::Bad(format!(
            "question {}: its document index {} is past the {} documents",
            q.id,
            q.relevant,
            docs.len()
        )));
    }
    Ok(())
}

/// Mean reciprocal rank of each query's relevant document in its ranking.
pub fn mean_reciprocal_rank(rankings: &[Vec<usize>], relevant: &[usize]) -> f64 {
    let sum: f64 = rankings
        .iter()
        .zip(relevant)
        .map(|(r, g)| {
            r.iter()
                .position(|i| i == g)
                .map_or(0.0, |p| 1.0 / (p + 1) as f64)
        })
        .sum();
    sum / rankings.len().max(1) as f64
}

/// Ranks every question with `retriever` and scores the rankings at `ks` (one `ranking` task,
/// advanced per question).
pub fn run_benchmark(
    docs: &[BenchDoc],
    queries: &[BenchQuery],
    ks: &[usize],
    retriever: BenchRetriever,
    progress: &dyn Progress,
) -> Result<RetrieverScores> {
    check(docs, queries, ks)?;
    let t0 = Instant::now();
    let depth = ks.iter().copied().max().expect("checked").min(docs.len());
    let texts: Vec<String> = docs.iter().map(BenchDoc::indexed).collect();
    let (name, rankings): (String, Vec<Vec<usize>>) = match retriever {
        BenchRetriever::Bm25 => {
            let index = Bm25Index::from_texts(&texts)?;
            progress.begin("ranking (bm25)", Some(queries.len() as u64));
            let r = queries
                .iter()
                .map(|q| {
                    progress.advance(1);
                    index.search(&q.text, depth)
                })
                .collect();
            ("bm25".to_string(), r)
        }
        BenchRetriever::Dense(name, encoder) => {
            progress.begin(&format!("embedding {} documents", docs.len()), None);
            let index = DenseIndex::from_texts(encoder, &texts, 16)?;
            let qs: Vec<String> = queries.iter().map(|q| q.text.clone()).collect();
            let embedded = encoder.encode(&qs, 32)?;
            let r = embedded.iter().map(|e| index.rank(e, depth)).collect();
            (format!("dense:{name}"), r)
        }
    };
    progress.end();
    let relevant: Vec<usize> = queries.iter().map(|q| q.relevant).collect();
    Ok(RetrieverScores {
        retriever: name,
        metrics: retrieval_metrics(&rankings, &relevant, ks),
        mrr: mean_reciprocal_rank(&rankings, &relevant),
        seconds: t0.elapsed().as_secs_f64(),
        rankings,
    })
}

/// Writes the benchmark in BEIR's layout under `dir` — `corpus.jsonl` (`_id`, `title`,
/// `text`), `queries.jsonl` (`_id`, `text`), `qrels/test.tsv` (`query-id`, `corpus-id`,
/// `score`) — and, for each retriever's results, `runs/<retriever>.trec` (TREC run format:
/// `qid Q0 docid rank score tag`, scores falling with rank). Every file is written atomically.
pub fn write_beir(
    dir: &Path,
    docs: &[BenchDoc],
    queries: &[BenchQuery],
    scores: &[RetrieverScores],
) -> Result<()> {
    // Each file's path under `dir`, its folder made.
    let place = |rel: &str| -> Result<PathBuf> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                BaselineError::Bad(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        Ok(path)
    };
    let failed = |e: engram_io::AtomicError| BaselineError::Bad(format!("cannot write {e}"));
    let write =
        |rel: &str, bytes: &[u8]| engram_io::write_file(&place(rel)?, bytes).map_err(failed);
    engram_io::write_jsonl(
        &place("corpus.jsonl")?,
        docs.iter().map(|d| {
            serde_json::json!({"_id": d.id, "title": d.title.clone().unwrap_or_default(), "text": d.text})
        }),
    )
    .map_err(failed)?;
    engram_io::write_jsonl(
        &place("queries.jsonl")?,
        queries
            .iter()
            .map(|q| serde_json::json!({"_id": q.id, "text": q.text})),
    )
    .map_err(failed)?;
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    for q in queries {
        qrels.push_str(&format!("{}\t{}\t1\n", q.id, docs[q.relevant].id));
    }
    write("qrels/test.tsv", qrels.as_bytes())?;
    for s in scores {
        let tag = s.retriever.replace([':', '/'], "_");
        let mut run = String::new();
        for (q, ranking) in queries.iter().zip(&s.rankings) {
            for (rank, &d) in ranking.iter().enumerate() {
                let score = (ranking.len() - rank) as f64;
                run.push_str(&format!(
                    "{} Q0 {} {} {score} {tag}\n",
                    q.id,
                    docs[d].id,
                    rank + 1
                ));
            }
        }
        write(&format!("runs/{tag}.trec"), run.as_bytes())?;
    }
    Ok(())
}
