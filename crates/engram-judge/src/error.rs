//! Judge errors. None of them ever carries the API key.

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The judge prompt file lacks a placeholder it needs.
    #[error("{path}: the judge prompt needs the placeholder `{placeholder}`")]
    MissingPlaceholder {
        /// The prompt file.
        path: PathBuf,
        /// The placeholder (`{question}`...).
        placeholder: String,
    },
    /// The API key variable is not set.
    #[error("the judge's API key variable `{var}` is not set")]
    MissingKey {
        /// The variable's name.
        var: String,
    },
    /// The endpoint failed too many times in a row; verdicts already made are cached.
    #[error(
        "judge endpoint {url} (model {model}) unreachable: {failures} requests in a row failed after retries (last: {last}); verdicts made so far are cached, rerun to judge the rest"
    )]
    Unreachable {
        /// The endpoint.
        url: String,
        /// The judge model.
        model: String,
        /// Consecutive failed requests.
        failures: usize,
        /// The last error.
        last: String,
    },
    /// The endpoint refused a request with a client error (4xx), which asking again would not
    /// change; verdicts already made are cached.
    #[error(
        "judge endpoint {url} (model {model}) refused the request for {item}: HTTP {status} ({hint}); verdicts made so far are cached"
    )]
    Refused {
        /// The endpoint.
        url: String,
        /// The judge model.
        model: String,
        /// The id of the item whose request was refused.
        item: String,
        /// The HTTP status.
        status: u16,
        /// What the status most likely means.
        hint: &'static str,
    },
    /// A bad setting.
    #[error("{0}")]
    Bad(String),
}

/// Result alias of this crate.
pub type Result<T, E = JudgeError> = std::result::Result<T, E>;
