//! RAG: index every fact (rephrased question + answer), retrieve the top-k for each question
//! (best first) into the prompt, and record how well retrieval found the question's own fact.

pub mod answer;
pub mod bert;
pub mod bm25;
pub mod dense;
pub mod metrics;

pub use answer::{RagConfig, RagRun, rag_answers};
pub use bert::BertEncoder;
pub use bm25::Bm25Index;
pub use dense::DenseIndex;
pub use metrics::{RetrievalMetrics, retrieval_metrics};
