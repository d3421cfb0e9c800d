//! Errors of checkpoint reading. Every variant names the file, tensor or key at fault.

use std::path::PathBuf;

/// What went wrong while locating or reading a checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file that the checkpoint needs is not there.
    #[error("{what} not found: {path}")]
    MissingFile {
        /// Which file this is (e.g. "config.json").
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// An I/O error on a named file.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file that does not parse.
    #[error("{path} is not valid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A safetensors file whose header or payload is inconsistent (e.g. truncated).
    #[error("{path} is not a valid safetensors file (truncated or corrupt?): {message}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What the reader said.
        message: String,
    },
    /// A GGUF file that does not parse (bad magic, truncated, unknown value type...).
    #[error("{path} is not a valid GGUF file: {message}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A sharded checkpoint's index names a shard that is not on disk.
    #[error("{index} names shard {shard}, which is missing")]
    MissingShard {
        /// The index file.
        index: PathBuf,
        /// The shard file name.
        shard: String,
    },
    /// A tensor the model needs is not in the checkpoint.
    #[error("tensor {name} not found in {origin}")]
    MissingTensor {
        /// The tensor name (HF spelling).
        name: String,
        /// The checkpoint.
        origin: String,
    },
    /// A tensor has a dtype we cannot read.
    #[error("tensor {name} in {origin} has unsupported dtype {dtype}")]
    UnsupportedDType {
        /// The tensor name.
        name: String,
        /// The checkpoint.
        origin: String,
        /// The dtype as the file spells it.
        dtype: String,
    },
    /// A config or metadata key is missing or has the wrong type.
    #[error("{origin}: key `{key}` {problem}")]
    BadKey {
        /// The file.
        origin: String,
        /// The key.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The model identifier is neither a directory, a .gguf file, nor a hub repo id.
    #[error("cannot resolve model `{spec}`: {reason}")]
    Unresolvable {
        /// What the user passed.
        spec: String,
        /// Why it could not be used.
        reason: String,
    },
    /// A download from the Hugging Face hub failed.
    #[error("hub: cannot fetch {file} of {repo}: {message}")]
    Hub {
        /// The repository id.
        repo: String,
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
    /// A checkpoint file or directory could not be written.
    #[error("cannot write {path}: {message}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Result alias of this crate.
pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;

impl CheckpointError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
