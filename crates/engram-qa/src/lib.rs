//! Verified question–answer facts from a corpus (EnronQA §3.2–3.3).
//!
//! Start here: [`run::generate_facts`] takes a corpus directory (from `engram corpus ingest`
//! and `filter`), an [`Llm`] that writes and checks pairs (an OpenAI-compatible endpoint,
//! [`llm::OpenAiLlm`], or a model engram runs itself), a judge, the prompts ([`prompts`], files
//! under `configs/qa/`) and the settings ([`QaConfig`]), and writes engram's fact JSONL plus a
//! record of every pair ([`record`]). The stages are in [`pipeline`], the checks in [`checks`];
//! every call goes through the persistent cache of [`llm::CachedLlm`], so an interrupted run
//! resumes where it stopped and a rerun writes the same bytes. `--local-only` is enforced in
//! [`run`] before anything is sent; [`estimate`] sizes a run without asking anything; [`freshness`] says whether a fact file is
//! what the settings would make now (a sweep reuses it only then). Nothing
//! here prints. [`reader`] answers a retrieval benchmark's questions from retrieved documents
//! and judges them (reader accuracy, EnronQA Table 4's shape).

mod checks;
mod config;
mod context;
mod error;
mod estimate;
mod freshness;
mod llm;
mod manifest;
mod pipeline;
mod prompts;
mod reader;
mod record;
mod reply;
mod run;

pub use config::{QaConfig, QaFlags};
pub use error::{QaError, Result};
pub use estimate::{Estimate, estimate, estimate_corpus};
pub use freshness::{Freshness, RunIdentity, freshness, read_manifest};
pub use llm::{ChatRequest, Completion, Llm, OpenAiLlm};
pub use prompts::QaPrompts;
pub use reader::{
    Condition, DEFAULT_MAX_TOKENS as DEFAULT_READER_MAX_TOKENS, ReaderPrompts, ReaderQuestion,
    ReaderScore, ReaderSettings, read_and_judge,
};
pub use record::{PairRecord, Status};
pub use run::{
    QaManifest, QaSpec, QaSummary, corpus_documents, corpus_fingerprint, generate_facts, run_dir,
};
