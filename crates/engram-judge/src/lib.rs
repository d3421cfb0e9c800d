//! Judges decide whether an answer matches the gold answer.
//!
//! Start here: a [`JudgePreset`] (a `configs/judges/*.toml` file, or `engram judge`'s flags)
//! builds a [`Judge`]; [`Judge::judge`] turns [`JudgeItem`]s into [`Verdict`]s that keep the
//! judge's name and raw output. Offline judges ([`offline`]: the one [`exact_match`] rule,
//! token F1, gold recall) need nothing; the LLM judge ([`openai`], EnronQA §6 uses
//! Llama-3.1-70B-Instruct) talks to any OpenAI-compatible endpoint with retries, a circuit
//! breaker and a persistent [`cache`].

pub mod cache;
pub mod calibrate;
pub mod client;
pub mod defaults;
pub mod error;
pub mod offline;
pub mod openai;
pub mod parse;
pub mod preset;
pub mod protocol;
pub mod template;
pub mod verdict;

pub use calibrate::{Calibration, LabelledAnswer, calibrate, read_labels};
pub use client::{ChatClient, ClientConfig, is_loopback};
pub use error::{JudgeError, Result};
pub use offline::{
    ExactMatchJudge, GoldRecallJudge, TokenF1Judge, exact_match, gold_recall, normalize, token_f1,
};
pub use openai::{OpenAiJudge, OpenAiJudgeConfig};
pub use preset::JudgePreset;
pub use protocol::VerdictFormat;
pub use template::JudgePrompt;
pub use verdict::{Judge, JudgeItem, Verdict};
