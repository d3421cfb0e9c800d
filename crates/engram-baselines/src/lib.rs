//! The baselines that LoRA memorization is compared with (EnronQA §6): **long context** (every
//! fact in the prompt, prefilled once and shared by all questions through its KV cache; NA once
//! the facts no longer fit) and **RAG** (BM25 top-k facts in the prompt, with Recall/NDCG of
//! the retrieval).

pub mod error;
pub mod long_context;
pub mod prompt;
pub mod rag;

pub use error::{BaselineError, Result};
pub use long_context::{LongContext, LongContextConfig, long_context_answers, naive_answers};
pub use rag::{Bm25Index, RagConfig, RagRun, rag_answers, retrieval_metrics};
