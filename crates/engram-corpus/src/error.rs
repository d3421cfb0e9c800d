//! Errors of corpus reading and filtering, each naming the path or setting at fault.

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// An input path that does not exist or cannot be listed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Inputs that hold no file at all.
    #[error("no files to read under {0}")]
    NoFiles(String),
    /// Inputs whose files were all unreadable.
    #[error("none of the {files} files under {inputs} could be read: {reasons}")]
    NothingRead {
        /// The inputs.
        inputs: String,
        /// Files seen.
        files: usize,
        /// Counts per reason.
        reasons: String,
    },
    /// A corpus directory or one of its files is missing or corrupt.
    #[error("{path}: {problem}")]
    Corpus {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A filter setting out of range.
    #[error("filter setting {key}: {problem}")]
    Setting {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// Every document was dropped.
    #[error("nothing is left after filtering {documents} documents: {reasons}")]
    NothingKept {
        /// Documents filtered.
        documents: usize,
        /// Counts per reason.
        reasons: String,
    },
    /// A file could not be written.
    #[error(transparent)]
    Write(#[from] engram_io::AtomicError),
}

impl CorpusError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| CorpusError::Io { path, source }
    }
}

/// Result alias of this crate.
pub type Result<T, E = CorpusError> = std::result::Result<T, E>;
