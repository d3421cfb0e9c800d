//! Errors of reading fact sets; each names the file and line.

use std::path::PathBuf;

/// What is wrong with a fact file.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not a fact object.
    #[error("{path}:{line}: {problem}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// Two facts share an id.
    #[error("{path}:{line}: duplicate id `{id}` (first used on line {first})")]
    DuplicateId {
        /// The file.
        path: PathBuf,
        /// 1-based line of the second use.
        line: usize,
        /// The id.
        id: String,
        /// 1-based line of the first use.
        first: usize,
    },
    /// The file holds no facts.
    #[error("{path}: no facts (the file is empty)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Result alias of this crate.
pub type Result<T, E = FactsError> = std::result::Result<T, E>;
