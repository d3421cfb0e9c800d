//! Errors of the baselines.

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// From the model (generation).
    #[error(transparent)]
    Model(#[from] engram_model::ModelError),
    /// From the tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] engram_tokenizer::TokenizerError),
    /// From reading the encoder's weights.
    #[error(transparent)]
    Checkpoint(#[from] engram_checkpoint::CheckpointError),
    /// An index with nothing to index.
    #[error(transparent)]
    Bm25(#[from] engram_retrieval::Bm25Error),
    /// A bad setting or input (empty fact set, no questions...).
    #[error("{0}")]
    Bad(String),
}

/// Result alias of this crate.
pub type Result<T, E = BaselineError> = std::result::Result<T, E>;
