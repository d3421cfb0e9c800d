//! RAG: index every fact (rephrased question + answer), retrieve the top-k for each question
//! (best first) into the prompt, and record how well retrieval found the question's own fact.

pub mod answer;
pub mod bm25;
pub mod metrics;

pub use answer::{RagConfig, RagRun, rag_answers};
pub use bm25::Bm25Index;
pub use metrics::{RetrievalMetrics, retrieval_metrics};
