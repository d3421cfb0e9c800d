//! What a run of `engram qa generate` says about itself (`OUT.qa/manifest.json`) and where its
//! records go: read by the run that writes it ([`crate::run`]) and by the freshness check that
//! decides whether a fact file is still current ([`crate::freshness`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::QaConfig;
use crate::llm::CallCounts;

/// The manifest format.
pub const FORMAT: u32 = 1;

/// The directory beside a fact file that holds a run's records and caches: `OUT.qa`.
pub fn run_dir(out: &Path) -> PathBuf {
    engram_io::sibling(out, ".qa")
}

/// A model and where its prompts go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The model.
    pub model: String,
    /// A URL, or `local:MODEL`.
    pub endpoint: String,
}

/// What a run says about itself (`OUT.qa/manifest.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QaManifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The engram version.
    pub engram: String,
    /// The corpus directory.
    pub corpus: String,
    /// Documents of the corpus (the specificity check's pool).
    pub corpus_documents: usize,
    /// The corpus's fingerprint when the facts were made (`engram_corpus::Corpus::fingerprint`;
    /// absent in manifests written before engram recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus_sha256: Option<String>,
    /// Documents generated from.
    pub documents: usize,
    /// Whether every document was finished (else the fact file was not written).
    pub complete: bool,
    /// Documents not finished.
    pub unfinished_documents: usize,
    /// Documents cut to `max_document_chars` in the prompts.
    pub truncated_documents: usize,
    /// The generator.
    pub generator: Endpoint,
    /// The model to train, when it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Endpoint>,
    /// The judge's fingerprint (its name, and for the LLM judge a hash of its prompt and
    /// verdict format).
    pub judge: String,
    /// The settings.
    pub settings: QaConfig,
    /// The prompt directory.
    pub prompts: String,
    /// SHA-256 over settings (less those that only pace the run), prompts, models and judge:
    /// the same hash, the same facts ([`crate::RunIdentity::hash`]).
    pub settings_hash: String,
    /// Pair slots finished.
    pub pairs: usize,
    /// Pairs kept.
    pub kept: usize,
    /// Pairs dropped, by reason.
    pub dropped_by_reason: BTreeMap<String, usize>,
    /// Calls per LLM (`generator`, `target`).
    pub calls: BTreeMap<String, CallCounts>,
    /// Answers judged (in this run, cached or not).
    pub judged: usize,
    /// Of them, answered from the judge's cache.
    pub judged_cached: usize,
    /// Every LLM call (generator, target, judge; cached or not) per kept fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_calls_per_kept_fact: Option<f64>,
}
