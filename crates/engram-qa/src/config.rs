//! The settings of QA generation, every default in this one place (`configs/qa/default.toml`
//! writes the same values out for users to copy and edit).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{QaError, Result};

/// How pairs are generated, checked and rephrased (EnronQA §3.2–3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QaConfig {
    /// Pairs asked per document (each later one sees the earlier questions, so they differ).
    pub questions_per_document: usize,
    /// Similar documents (BM25 over the corpus) shown beside a pair's own in the specificity
    /// check: EnronQA shows 10 in all.
    pub similar_documents: usize,
    /// Listings the specificity check asks, its own document at a different place in each, all
    /// of which must be answered right (EnronQA: 1; 2 or more guard against a model that
    /// favours a position).
    pub specific_trials: usize,
    /// Independent answers from the document that must all match the gold answer (objectivity).
    pub objective_answers: usize,
    /// Rounds of refinement (the failed check as feedback) before a pair is dropped.
    pub refine_rounds: usize,
    /// Rephrasings tried before a question is dropped as unverified (EnronQA: 15).
    pub rephrase_tries: usize,
    /// Sampling temperature of generation, refinement, rephrasing and the independent answers;
    /// the checks themselves ask at temperature 0.
    pub temperature: f64,
    /// Most tokens one LLM reply may have.
    pub max_tokens: usize,
    /// Seed of every sampled call (each call derives its own from it, the document and the
    /// stage, so a rerun asks the very same requests).
    pub seed: u64,
    /// Characters of a document shown in a prompt (longer ones are cut there, and noted).
    pub max_document_chars: usize,
    /// Characters of each document listed in the specificity check (its own and the similar
    /// ones, cut alike so that length gives nothing away).
    pub excerpt_chars: usize,
    /// Generate from the first this many documents only (a trial run); the specificity check
    /// still draws its similar documents from the whole corpus. `None`: every document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_documents: Option<usize>,
    /// Documents worked on at once (each has its calls in sequence).
    pub concurrency: usize,
    /// Failed calls in a row (after their retries) that stop the run.
    pub breaker_after: usize,
}

impl Default for QaConfig {
    fn default() -> Self {
        Self {
            questions_per_document: 1,
            similar_documents: 9,
            specific_trials: 1,
            objective_answers: 2,
            refine_rounds: 2,
            rephrase_tries: 15,
            temperature: 0.7,
            max_tokens: 512,
            seed: 0,
            max_document_chars: 8000,
            excerpt_chars: 1500,
            max_documents: None,
            concurrency: 4,
            breaker_after: 5,
        }
    }
}

impl QaConfig {
    /// Reads a settings file (TOML; keys left out keep their defaults, unknown keys are named).
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(QaError::file(path))?;
        let cfg: Self = toml::from_str(&text).map_err(|e| QaError::File {
            path: path.to_path_buf(),
            problem: e.to_string(),
        })?;
        cfg.check()?;
        Ok(cfg)
    }

    /// How many of `available` documents pairs are generated from: the first `max_documents`,
    /// or all.
    pub fn documents_used(&self, available: usize) -> usize {
        available.min(self.max_documents.unwrap_or(usize::MAX))
    }

    /// Names the first setting out of range.
    pub fn check(&self) -> Result<()> {
        let bad = |key: &str, problem: &str| {
            Err(QaError::Setting {
                key: key.into(),
                problem: problem.into(),
            })
        };
        if self.questions_per_document == 0 {
            return bad("questions_per_document", "must be at least 1");
        }
        if self.specific_trials == 0 {
            return bad("specific_trials", "must be at least 1");
        }
        if self.objective_answers == 0 {
            return bad("objective_answers", "must be at least 1");
        }
        if self.rephrase_tries == 0 {
            return bad("rephrase_tries", "must be at least 1");
        }
        if !(0.0..=2.0).contains(&self.temperature) {
            return bad("temperature", "must be within 0 … 2");
        }
        if self.max_tokens == 0 {
            return bad("max_tokens", "must be at least 1");
        }
        if self.max_document_chars < 100 {
            return bad("max_document_chars", "must be at least 100");
        }
        if self.excerpt_chars < 100 {
            return bad("excerpt_chars", "must be at least 100");
        }
        if self.max_documents == Some(0) {
            return bad(
                "max_documents",
                "must be at least 1 (leave it out for every document)",
            );
        }
        if self.concurrency == 0 {
            return bad("concurrency", "must be at least 1");
        }
        if self.breaker_after == 0 {
            return bad("breaker_after", "must be at least 1");
        }
        Ok(())
    }
}

/// A settings file and the flags that override its keys (with the `clap` feature,
/// `engram qa generate`'s).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct QaFlags {
    /// Settings (TOML, keys as in configs/qa/default.toml); the flags below override it.
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Option<std::path::PathBuf>,
    /// Pairs asked per document.
    #[cfg_attr(feature = "clap", arg(long))]
    pub questions_per_document: Option<usize>,
    /// Generate from the first N documents only (a trial run; the specificity check still
    /// draws from the whole corpus).
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_documents: Option<usize>,
    /// Documents worked on at once.
    #[cfg_attr(feature = "clap", arg(long))]
    pub concurrency: Option<usize>,
}

impl QaFlags {
    /// The settings: the defaults, the `config` file, then the flags given; checked.
    pub fn settings(&self) -> Result<QaConfig> {
        let mut cfg = match &self.config {
            Some(p) => QaConfig::from_file(p)?,
            None => QaConfig::default(),
        };
        if let Some(n) = self.questions_per_document {
            cfg.questions_per_document = n;
        }
        if self.max_documents.is_some() {
            cfg.max_documents = self.max_documents;
        }
        if let Some(n) = self.concurrency {
            cfg.concurrency = n;
        }
        cfg.check()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_keep_defaults_name_unknown_keys_and_check_ranges() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("qa.toml");
        std::fs::write(&p, "rephrase_tries = 3\n").unwrap();
        let c = QaConfig::from_file(&p).unwrap();
        assert_eq!(c.rephrase_tries, 3);
        assert_eq!(c.similar_documents, QaConfig::default().similar_documents);
        std::fs::write(&p, "rephrase_trys = 3\n").unwrap();
        let e = QaConfig::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("qa.toml") && e.contains("rephrase_trys"), "{e}");
        std::fs::write(&p, "concurrency = 0\n").unwrap();
        let e = QaConfig::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("concurrency"), "{e}");
    }
}
