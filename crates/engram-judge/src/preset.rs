//! Judge presets (`configs/judges/NAME.toml`, or `engram judge`'s flags) and the one place a
//! judge is built from them: offline judges need nothing, the LLM judge gets its prompt file,
//! its persistent cache and its endpoint settings.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cache::JudgeCache;
use crate::error::Result;
use crate::offline::{ExactMatchJudge, GoldRecallJudge, TokenF1Judge};
use crate::openai::{OpenAiJudge, OpenAiJudgeConfig};
use crate::protocol::VerdictFormat;
use crate::template::JudgePrompt;
use crate::verdict::Judge;

pub use crate::defaults::{DEFAULT_CONCURRENCY, DEFAULT_F1_THRESHOLD, DEFAULT_RECALL_THRESHOLD};

fn f1_threshold() -> f64 {
    DEFAULT_F1_THRESHOLD
}
fn recall_threshold() -> f64 {
    DEFAULT_RECALL_THRESHOLD
}
fn concurrency() -> usize {
    DEFAULT_CONCURRENCY
}

/// A judge preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum JudgePreset {
    /// Offline: normalized exact match. (A struct variant with no fields, not a unit one:
    /// serde reads a unit variant of an internally tagged enum by skipping every other key,
    /// so `deny_unknown_fields` would not reach it and a stray `threshold` would pass.)
    ExactMatch {},
    /// Offline: token F1 against the gold answer at or above `threshold`.
    TokenF1 {
        /// Smallest F1 that counts as correct.
        #[serde(default = "f1_threshold")]
        threshold: f64,
    },
    /// Offline: the answer contains at least `threshold` of the gold answer's tokens.
    GoldRecall {
        /// Smallest share of gold tokens (1.0: all of them).
        #[serde(default = "recall_threshold")]
        threshold: f64,
    },
    /// An LLM behind an OpenAI-compatible endpoint (EnronQA: Llama-3.1-70B-Instruct).
    Openai {
        /// Base URL, e.g. `http://localhost:8000/v1`.
        base_url: String,
        /// The judge model.
        model: String,
        /// Environment variable holding the API key (the key itself never appears in files).
        #[serde(default)]
        api_key_env: Option<String>,
        /// The judge prompt (relative to the preset file).
        prompt: String,
        /// The persistent judge cache: a `.jsonl` file, or a directory that many writers share
        /// ([`crate::cache`]; default: `judge-cache/` in the results directory).
        #[serde(default)]
        cache: Option<String>,
        /// Requests in flight.
        #[serde(default = "concurrency")]
        concurrency: usize,
        /// How the verdict is asked for: `auto` (JSON through `response_format`, text if the
        /// server rejects it), `json` or `text`.
        #[serde(default)]
        verdict_format: VerdictFormat,
    },
}

impl JudgePreset {
    /// The offline judges at their default thresholds, each with the name `--judge` takes for
    /// it: `exact-match`, `token-f1`, `gold-recall`.
    pub fn offline_defaults() -> [(&'static str, JudgePreset); 3] {
        [
            ("exact-match", JudgePreset::ExactMatch {}),
            (
                "token-f1",
                JudgePreset::TokenF1 {
                    threshold: DEFAULT_F1_THRESHOLD,
                },
            ),
            (
                "gold-recall",
                JudgePreset::GoldRecall {
                    threshold: DEFAULT_RECALL_THRESHOLD,
                },
            ),
        ]
    }

    /// The LLM judge's prompt file, relative paths taken from `base` (the preset's directory).
    pub fn prompt_path(&self, base: &Path) -> Option<std::path::PathBuf> {
        match self {
            JudgePreset::Openai { prompt, .. } => Some(base.join(prompt)),
            _ => None,
        }
    }

    /// The judge this preset describes. Relative `prompt` and `cache` paths are taken from
    /// `base`; without a `cache`, the LLM judge keeps its cache at `default_cache`. A cache path
    /// ending in `.jsonl` is one file, any other a directory shared by many writers.
    pub fn build(&self, base: &Path, default_cache: &Path) -> Result<Box<dyn Judge>> {
        Ok(match self {
            JudgePreset::ExactMatch {} => Box::new(ExactMatchJudge),
            JudgePreset::TokenF1 { threshold } => Box::new(TokenF1Judge {
                threshold: *threshold,
            }),
            JudgePreset::GoldRecall { threshold } => Box::new(GoldRecallJudge {
                threshold: *threshold,
            }),
            JudgePreset::Openai {
                base_url,
                model,
                api_key_env,
                prompt,
                cache,
                concurrency,
                verdict_format,
            } => {
                let mut cfg = OpenAiJudgeConfig::new(base_url, model);
                cfg.client.api_key_env = api_key_env.clone();
                cfg.concurrency = *concurrency;
                cfg.format = *verdict_format;
                let cache_path = cache
                    .as_ref()
                    .map_or(default_cache.to_path_buf(), |c| base.join(c));
                let cache = if cache_path.extension().is_some_and(|e| e == "jsonl") {
                    JudgeCache::open(&cache_path)?
                } else {
                    JudgeCache::open_shared(&cache_path)?
                };
                let prompt = JudgePrompt::load(&base.join(prompt))?;
                Box::new(OpenAiJudge::new(cfg, prompt, cache)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::JudgeItem;

    #[test]
    fn presets_build_the_judges_they_name() {
        let tmp = tempfile::tempdir().unwrap();
        let offline: JudgePreset = toml_like(r#"{"kind": "token-f1"}"#);
        assert_eq!(offline, JudgePreset::TokenF1 { threshold: 0.5 });
        let judge = offline
            .build(tmp.path(), &tmp.path().join("c.jsonl"))
            .unwrap();
        assert_eq!(judge.name(), "offline:token-f1>=0.5");
        let v = judge
            .judge(&[JudgeItem {
                id: "1".into(),
                question: "q".into(),
                gold: "Room 101".into(),
                answer: Some("room 101".into()),
                document: None,
            }])
            .unwrap();
        assert_eq!(v[0].correct, Some(true));

        std::fs::write(tmp.path().join("p.txt"), "{question} {gold} {answer}").unwrap();
        let llm: JudgePreset = toml_like(
            r#"{"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "prompt": "p.txt"}"#,
        );
        let judge = llm.build(tmp.path(), &tmp.path().join("c.jsonl")).unwrap();
        assert_eq!(judge.name(), "openai:m");
        assert!(judge.notes().is_empty());
        std::fs::write(tmp.path().join("bad.jsonl"), "not json\n").unwrap();
        let judge = llm
            .build(tmp.path(), &tmp.path().join("bad.jsonl"))
            .unwrap();
        let notes = judge.notes();
        assert!(
            notes.len() == 1 && notes[0].contains("bad.jsonl") && notes[0].contains("1 corrupt"),
            "{notes:?}"
        );

        let missing: JudgePreset = toml_like(
            r#"{"kind": "openai", "base_url": "u", "model": "m", "prompt": "absent.txt"}"#,
        );
        let e = missing
            .build(tmp.path(), &tmp.path().join("c.jsonl"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("absent.txt"), "{e}");
    }

    /// Every kind refuses keys it does not have, the one without settings too.
    #[test]
    fn unknown_keys_are_refused_for_every_kind() {
        let exact: JudgePreset = toml_like(r#"{"kind": "exact-match"}"#);
        assert_eq!(exact, JudgePreset::ExactMatch {});
        assert_eq!(
            serde_json::to_value(&exact).unwrap(),
            serde_json::json!({"kind": "exact-match"}),
            "the configuration hash of exact-match cells is unchanged"
        );
        for json in [
            r#"{"kind": "exact-match", "threshold": 0.8}"#,
            r#"{"kind": "token-f1", "cahce": "x"}"#,
            r#"{"kind": "gold-recall", "threshold": 1.0, "model": "m"}"#,
        ] {
            let e = serde_json::from_str::<JudgePreset>(json).unwrap_err();
            assert!(e.to_string().contains("unknown field"), "{json}: {e}");
        }
    }

    fn toml_like(json: &str) -> JudgePreset {
        serde_json::from_str(json).unwrap()
    }
}
