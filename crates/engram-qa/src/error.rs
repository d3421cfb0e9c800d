//! Errors of QA generation, each naming the file, setting or endpoint at fault. None of them
//! ever carries an API key or a document's text.

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum QaError {
    /// A file could not be read or written.
    #[error("{path}: {problem}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A prompt file lacks a placeholder it needs.
    #[error("{path}: the {stage} prompt needs the placeholder `{{{placeholder}}}`")]
    MissingPlaceholder {
        /// The prompt file.
        path: PathBuf,
        /// The stage it serves.
        stage: &'static str,
        /// The placeholder.
        placeholder: &'static str,
    },
    /// A setting out of range, or an unknown key.
    #[error("QA setting {key}: {problem}")]
    Setting {
        /// The setting.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// `--local-only` and an endpoint that is not on this machine.
    #[error(
        "--local-only: the {role} endpoint {url} is not on this machine (only localhost, 127.0.0.0/8 and ::1 are); no document was sent"
    )]
    NotLocal {
        /// `generator` or `judge`.
        role: &'static str,
        /// The URL.
        url: String,
    },
    /// The corpus holds no document to generate from.
    #[error("{path}: no documents to generate questions from ({why})")]
    NoDocuments {
        /// The corpus directory.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// An endpoint kept failing; what was generated so far is cached and written.
    #[error(
        "{endpoint} unreachable: {failures} calls in a row failed after retries (last: {last}); {done} of {total} documents finished, every answer so far is cached: rerun to go on"
    )]
    Unreachable {
        /// The endpoint (a URL, or `local:MODEL`).
        endpoint: String,
        /// Consecutive failed calls.
        failures: usize,
        /// The last error.
        last: String,
        /// Work items finished.
        done: usize,
        /// Work items in all.
        total: usize,
    },
    /// Some items' calls failed after their retries, too few in a row to stop the run: the
    /// first of them, and its error.
    #[error(
        "{failed} of {total} items failed after their retries, {item} first ({endpoint}: {message}); every answer so far is cached: rerun to go on (an error that comes back on every rerun needs a setting changed)"
    )]
    CallsFailed {
        /// Items that failed.
        failed: usize,
        /// Work items in all.
        total: usize,
        /// The first that failed (`document <id>`, or the rephrasing of one of its pairs).
        item: String,
        /// The endpoint its call went to.
        endpoint: String,
        /// What went wrong.
        message: String,
    },
    /// A stop was requested (a signal); every answer so far is cached.
    #[error(
        "stopped by signal {signal}: {done} of {total} finished, every answer so far is cached: rerun to go on"
    )]
    Stopped {
        /// The signal.
        signal: usize,
        /// Work items finished.
        done: usize,
        /// Work items in all.
        total: usize,
    },
    /// No pair survived the checks.
    #[error("no question–answer pair passed the checks ({reasons}); see {path}")]
    NothingKept {
        /// Counts per reason.
        reasons: String,
        /// The file with every pair's checks.
        path: PathBuf,
    },
    /// The judge failed.
    #[error(transparent)]
    Judge(#[from] engram_judge::JudgeError),
    /// The corpus could not be read.
    #[error(transparent)]
    Corpus(#[from] engram_corpus::CorpusError),
    /// A file could not be written.
    #[error(transparent)]
    Write(#[from] engram_io::AtomicError),
}

impl QaError {
    /// A file error on `path`.
    pub fn file(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |e| QaError::File {
            path,
            problem: e.to_string(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = QaError> = std::result::Result<T, E>;
