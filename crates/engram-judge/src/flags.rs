//! A judge described by flags (`engram judge --judge KIND …`) rather than a preset file.

use std::path::{Path, PathBuf};

use crate::defaults::{
    DEFAULT_BASE_URL, DEFAULT_CONCURRENCY, DEFAULT_F1_THRESHOLD, DEFAULT_JUDGE_MODEL,
    DEFAULT_JUDGE_PROMPT, DEFAULT_RECALL_THRESHOLD,
};
use crate::preset::JudgePreset;
use crate::protocol::VerdictFormat;

/// Which judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum JudgeKind {
    /// Offline: normalized exact match.
    ExactMatch,
    /// Offline: token F1 ≥ --f1-threshold.
    TokenF1,
    /// Offline: the answer holds every token of the gold answer (token recall ≥ --recall-threshold).
    GoldRecall,
    /// An LLM over an OpenAI-compatible endpoint.
    Openai,
}

/// A judge and its settings, as flags (with the `clap` feature, `engram judge`'s).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct JudgeFlags {
    /// The judge.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "token-f1"))]
    pub judge: JudgeKind,
    /// Threshold of the token-F1 judge.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_F1_THRESHOLD))]
    pub f1_threshold: f64,
    /// Threshold of the gold-recall judge.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_RECALL_THRESHOLD))]
    pub recall_threshold: f64,
    /// OpenAI-compatible base URL (e.g. http://localhost:8000/v1).
    #[cfg_attr(feature = "clap", arg(long, default_value = DEFAULT_BASE_URL))]
    pub base_url: String,
    /// Judge model.
    #[cfg_attr(feature = "clap", arg(long, default_value = DEFAULT_JUDGE_MODEL))]
    pub judge_model: String,
    /// Environment variable that holds the API key (never logged).
    #[cfg_attr(feature = "clap", arg(long))]
    pub api_key_env: Option<String>,
    /// The judge prompt file.
    #[cfg_attr(feature = "clap", arg(long, default_value = DEFAULT_JUDGE_PROMPT))]
    pub prompt: PathBuf,
    /// How the LLM judge is asked for its verdict: auto (a JSON object through
    /// `response_format`, text if the server rejects the field), json or text.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = VerdictFormat::Auto))]
    pub verdict_format: VerdictFormat,
    /// Requests in flight.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_CONCURRENCY))]
    pub concurrency: usize,
}

impl Default for JudgeFlags {
    /// The command line's defaults: the token-F1 judge; an LLM judge at
    /// [`DEFAULT_BASE_URL`] with EnronQA's judge model and prompt.
    fn default() -> Self {
        Self {
            judge: JudgeKind::TokenF1,
            f1_threshold: DEFAULT_F1_THRESHOLD,
            recall_threshold: DEFAULT_RECALL_THRESHOLD,
            base_url: DEFAULT_BASE_URL.into(),
            judge_model: DEFAULT_JUDGE_MODEL.into(),
            api_key_env: None,
            prompt: DEFAULT_JUDGE_PROMPT.into(),
            verdict_format: VerdictFormat::Auto,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

impl JudgeFlags {
    /// The judge these flags describe; an LLM judge keeps its cache at `cache`.
    pub fn preset(&self, cache: &Path) -> JudgePreset {
        match self.judge {
            JudgeKind::ExactMatch => JudgePreset::ExactMatch {},
            JudgeKind::TokenF1 => JudgePreset::TokenF1 {
                threshold: self.f1_threshold,
            },
            JudgeKind::GoldRecall => JudgePreset::GoldRecall {
                threshold: self.recall_threshold,
            },
            JudgeKind::Openai => JudgePreset::Openai {
                base_url: self.base_url.clone(),
                model: self.judge_model.clone(),
                api_key_env: self.api_key_env.clone(),
                prompt: self.prompt.display().to_string(),
                cache: Some(cache.display().to_string()),
                concurrency: self.concurrency,
                verdict_format: self.verdict_format,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_describe_the_judge_they_name() {
        let flags = JudgeFlags::default();
        assert_eq!(
            flags.preset(Path::new("c.jsonl")),
            JudgePreset::TokenF1 {
                threshold: DEFAULT_F1_THRESHOLD
            }
        );
        let llm = JudgeFlags {
            judge: JudgeKind::Openai,
            ..flags
        };
        match llm.preset(Path::new("c.jsonl")) {
            JudgePreset::Openai {
                base_url, cache, ..
            } => {
                assert_eq!(base_url, DEFAULT_BASE_URL);
                assert_eq!(cache.as_deref(), Some("c.jsonl"));
            }
            other => panic!("{other:?}"),
        }
    }
}
