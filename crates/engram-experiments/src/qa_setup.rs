//! The `[qa]` table of an experiment whose facts come from a corpus (`[facts] source =
//! "corpus"`): who generates and checks the question–answer pairs, with which settings and
//! prompts. Resolved at load like the other presets: the settings preset
//! (`configs/qa/<settings>.toml`) with `[override.qa]` applied, the judge preset, the prompts.
//!
//! ```toml
//! [facts]
//! source = "corpus"
//! corpus = "../corpora/mail"        # from `engram corpus ingest` (and `filter`)
//! path = "facts/mail.jsonl"         # the verified facts, built once and reused
//! sizes = [10, 100]
//!
//! [qa]
//! generator = "http://localhost:8080/v1"   # or "local:MODEL" (engram runs it itself)
//! model = "qwen2.5-7b-instruct"            # the model name at that endpoint
//! judge = "small-judge"                    # default: the experiment's judge
//! local_only = true
//!
//! [override.qa]                            # any key of configs/qa/default.toml
//! questions_per_document = 2
//! ```

use std::path::{Path, PathBuf};

use engram_judge::JudgePreset;
use engram_qa::QaConfig;
use serde::{Deserialize, Serialize};

/// Default per-request timeout of the generator's endpoint, in seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 120;

fn default_settings() -> String {
    "default".into()
}
fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_S
}
fn yes() -> bool {
    true
}

/// The `[qa]` table as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QaSection {
    /// An OpenAI-compatible base URL, or `local:MODEL` (a directory, `.gguf` file or registry
    /// alias) for a model engram runs itself, so that the text stays in the process.
    pub generator: String,
    /// The generator's model name at its endpoint (needed for a URL).
    #[serde(default)]
    pub model: Option<String>,
    /// Environment variable holding the endpoint's API key (never logged or written).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Per-request timeout of the endpoint, in seconds.
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// The QA settings preset: `configs/qa/<name>.toml`, or a path ending `.toml` (relative to
    /// the experiment file); `[override.qa]` changes single keys.
    #[serde(default = "default_settings")]
    pub settings: String,
    /// The directory of prompt files (relative to the experiment file; default: `configs/qa`).
    #[serde(default)]
    pub prompts: Option<String>,
    /// The judge preset of the checks (`configs/judges/<name>.toml`); default: the experiment's
    /// own judge.
    #[serde(default)]
    pub judge: Option<String>,
    /// Also drop a pair the experiment's own model answers correctly without the document (the
    /// grounded-target check): it could not show memorization.
    #[serde(default = "yes")]
    pub ask_target: bool,
    /// Refuse a generator or judge endpoint that is not on this machine.
    #[serde(default)]
    pub local_only: bool,
}

/// The `[qa]` table resolved: settings with overrides, the prompts directory, the judge.
#[derive(Debug, Clone)]
pub struct QaSetup {
    /// As written.
    pub section: QaSection,
    /// The settings (preset, overrides applied).
    pub cfg: QaConfig,
    /// The prompt files' directory.
    pub prompts: PathBuf,
    /// The judge of the checks.
    pub judge: JudgePreset,
    /// Its directory (relative paths in it start there).
    pub judge_dir: PathBuf,
}

impl QaSetup {
    /// The generator's model name as QA generation records it: `local:MODEL`, or the name at
    /// the endpoint.
    pub fn generator_name(&self) -> String {
        match self.section.generator.strip_prefix("local:") {
            Some(_) => self.section.generator.clone(),
            None => self.section.model.clone().unwrap_or_default(),
        }
    }

    /// The judge's endpoint, when it has one (for `local_only`).
    pub fn judge_endpoint(&self) -> Option<String> {
        match &self.judge {
            JudgePreset::Openai { base_url, .. } => Some(base_url.clone()),
            _ => None,
        }
    }
}

/// The prompts directory: `prompts` from the experiment file's directory, else `configs/qa`.
pub(crate) fn prompts_dir(experiment: &Path, configs: &Path, prompts: Option<&str>) -> PathBuf {
    match prompts {
        Some(p) => experiment.parent().unwrap_or(Path::new(".")).join(p),
        None => configs.join("qa"),
    }
}
