//! Judges decide whether an answer matches the gold answer.
//!
//! Start here: a [`JudgePreset`] (a `configs/judges/*.toml` file, or `engram judge`'s flags)
//! builds a [`Judge`]; [`Judge::judge`] turns [`JudgeItem`]s into [`Verdict`]s that keep the
//! judge's name and raw output. Offline judges ([`offline`]: the one [`exact_match`] rule,
//! token F1, gold recall) need nothing; the LLM judge ([`openai`], EnronQA §6 uses
//! Llama-3.1-70B-Instruct) talks to any OpenAI-compatible endpoint with retries, a circuit
//! breaker and a persistent [`cache`].

mod answers;
mod cache;
mod calibrate;
mod client;
mod defaults;
mod error;
mod flags;
mod offline;
mod openai;
mod parse;
mod preset;
mod protocol;
mod template;
mod verdict;

pub use answers::{AnswerLine, read_answers, write_answers, write_verdicts};
pub use cache::{JudgeCache, cache_key};
pub use calibrate::{Calibration, LabelledAnswer, calibrate, calibrate_with_offline, read_labels};
pub use client::{AskError, ChatClient, ClientConfig, is_loopback};
pub use defaults::{
    DEFAULT_BACKOFF, DEFAULT_BASE_URL, DEFAULT_CONCURRENCY, DEFAULT_F1_THRESHOLD,
    DEFAULT_JUDGE_MODEL, DEFAULT_JUDGE_PROMPT, DEFAULT_MAX_RETRIES, DEFAULT_RECALL_THRESHOLD,
    DEFAULT_TIMEOUT,
};
pub use error::{JudgeError, Result};
pub use flags::{JudgeFlags, JudgeKind};
pub use offline::{
    ExactMatchJudge, GoldRecallJudge, TokenF1Judge, exact_match, gold_recall, normalize, token_f1,
};
pub use openai::{OpenAiJudge, OpenAiJudgeConfig};
pub use preset::JudgePreset;
pub use protocol::{FOLLOW_UP, Message, VerdictFormat};
pub use template::{JudgePrompt, split_system};
pub use verdict::{Judge, JudgeItem, Verdict};
