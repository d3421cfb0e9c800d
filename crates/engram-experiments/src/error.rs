//! Errors of experiments: each names the file, key or value at fault.

use std::path::{Path, PathBuf};

/// What went wrong while reading an experiment, its presets, data or results.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A config file that is not valid TOML for its kind (unknown key, wrong type, missing key).
    #[error("{path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the key).
        message: String,
    },
    /// A method the table does not have (`engram table --paired`).
    #[error("the table has no method `{name}` (it has: {known})")]
    UnknownMethod {
        /// The name asked for.
        name: String,
        /// The methods it has, by slug.
        known: String,
    },
    /// An experiment names a preset that does not exist.
    #[error("{experiment}: {kind} preset `{name}` not found (looked for {looked})")]
    MissingPreset {
        /// The experiment file.
        experiment: PathBuf,
        /// models, training, judges or qa.
        kind: &'static str,
        /// The name it gave.
        name: String,
        /// Where it was looked for.
        looked: String,
    },
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A parquet file that does not hold what EnronQA's files hold.
    #[error("{path}: {message}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The experiment asks for more facts than its source holds.
    #[error(
        "{experiment}: facts.sizes asks for {wanted} facts, but {source_desc} holds only {available}"
    )]
    TooFewFacts {
        /// The experiment file.
        experiment: PathBuf,
        /// Requested.
        wanted: usize,
        /// Available.
        available: usize,
        /// The source (file, split, inbox).
        source_desc: String,
    },
    /// Downloading the dataset (or reading it from the HF cache) failed.
    #[error(transparent)]
    Checkpoint(#[from] engram_checkpoint::CheckpointError),
    /// A file could not be written (atomically).
    #[error(transparent)]
    Write(#[from] engram_io::AtomicError),
    /// A fact file problem.
    #[error(transparent)]
    Facts(#[from] engram_facts::FactsError),
    /// The verified facts of a `source = "corpus"` experiment are not built yet.
    #[error(
        "{experiment}: the verified facts {facts} are not built yet (run `engram sweep {experiment}`, which builds them first, or `engram qa generate`)"
    )]
    FactsNotBuilt {
        /// The experiment file.
        experiment: PathBuf,
        /// The fact file it names.
        facts: PathBuf,
    },
    /// The fact file was made with other QA settings than the experiment gives now.
    #[error(
        "{facts} was generated with other QA settings than {experiment} gives now ({changed}); rerun with --rebuild-facts to generate them again (unchanged LLM calls come from the cache, and cells run on the old facts run again), or set facts.path to a new file to keep both"
    )]
    StaleFacts {
        /// The experiment file.
        experiment: PathBuf,
        /// The fact file.
        facts: PathBuf,
        /// What changed, `key: old → new`, separated by `; `.
        changed: String,
    },
    /// A fact file that QA generation did not write (no `OUT.qa/manifest.json` beside it).
    #[error(
        "{facts} holds facts that `engram qa generate` did not write (no {manifest}); a corpus experiment will not overwrite it: set facts.path to a new file, or use facts.source = \"jsonl\" to run on it as it is"
    )]
    ForeignFacts {
        /// The fact file.
        facts: PathBuf,
        /// The manifest looked for.
        manifest: PathBuf,
    },
    /// QA generation failed (what it made so far is cached).
    #[error(transparent)]
    Qa(#[from] engram_qa::QaError),
    /// A judge could not be built.
    #[error(transparent)]
    Judge(#[from] engram_judge::JudgeError),
}

impl ExperimentError {
    /// An I/O error mapper naming `path`.
    pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Result of this crate.
pub type Result<T, E = ExperimentError> = std::result::Result<T, E>;
