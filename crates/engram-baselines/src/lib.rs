//! The baselines that LoRA memorization is compared with (EnronQA §6), and the one entry point
//! that answers by any method.
//!
//! Start here: [`answer_by`] answers a fact set's questions by a [`Method`] — from the weights
//! (the model carries its adapters), with every fact in the prompt ([`long_context`]: prefilled
//! once and shared by all questions through its KV cache; NA once the facts no longer fit), or
//! with the top-k retrieved facts in the prompt ([`rag`]: BM25 or a BERT encoder, with
//! Recall/NDCG of the retrieval). The sweep and `engram answer` both call it.

mod error;
mod long_context;
mod method;
mod prompt;
pub mod rag;

pub use error::{BaselineError, Result};
pub use long_context::{
    LongContext, LongContextConfig, long_context_answers, long_context_prompts, naive_answers,
};
pub use method::{Measured, Method, MethodRun, answer_by};
pub use rag::{Bm25Index, RagConfig, RagRun, Retriever, rag_answers, retrieval_metrics};
