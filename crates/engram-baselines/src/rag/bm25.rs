//! The default retriever, BM25: [`engram_retrieval`]'s index (a crate of its own, so that QA
//! generation's specificity check uses it without a tensor library).

pub use engram_retrieval::{Bm25Index, fact_text};
