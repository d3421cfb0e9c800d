//! Errors of tokenization and chat templating.

/// What went wrong while loading a tokenizer or rendering a prompt.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// No `tokenizer.json` (or GGUF tokenizer metadata) was found.
    #[error("{origin}: no tokenizer.json (the model directory needs one to encode text)")]
    Missing {
        /// The checkpoint.
        origin: String,
    },
    /// `tokenizer.json` did not load.
    #[error("{origin}: tokenizer.json does not load: {message}")]
    Load {
        /// The checkpoint.
        origin: String,
        /// The tokenizers crate's message.
        message: String,
    },
    /// Encoding or decoding failed.
    #[error("tokenizer: {0}")]
    Codec(String),
    /// The checkpoint has no chat template but one was needed.
    #[error("{origin}: no chat_template in tokenizer_config.json (drop --chat for a base model)")]
    NoChatTemplate {
        /// The checkpoint.
        origin: String,
    },
    /// The chat template failed to compile or render.
    #[error("{origin}: chat template: {message}")]
    Template {
        /// The checkpoint.
        origin: String,
        /// minijinja's message (including `raise_exception` texts).
        message: String,
    },
    /// An empty prompt was given.
    #[error("empty prompt: give some text to encode")]
    EmptyPrompt,
}

/// Result alias of this crate.
pub type Result<T, E = TokenizerError> = std::result::Result<T, E>;
