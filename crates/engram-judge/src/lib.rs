//! Judges decide whether an answer matches the gold answer. Offline judges (normalized exact
//! match, token F1 ≥ threshold) need nothing; the LLM judge (EnronQA §6 uses
//! Llama-3.1-70B-Instruct) talks to any OpenAI-compatible Chat Completions endpoint. Every verdict
//! keeps the judge's name and raw output, so results always say which judge made them.

pub mod cache;
pub mod error;
pub mod offline;
pub mod openai;
pub mod parse;
pub mod template;
pub mod verdict;

pub use error::{JudgeError, Result};
pub use offline::{
    ExactMatchJudge, GoldRecallJudge, TokenF1Judge, gold_recall, normalize, token_f1,
};
pub use openai::{OpenAiJudge, OpenAiJudgeConfig};
pub use template::JudgePrompt;
pub use verdict::{Judge, JudgeItem, Verdict};
