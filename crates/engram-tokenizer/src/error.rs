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
    #[error(
        "{origin}: no chat template (neither chat_template.jinja nor a chat_template key in tokenizer_config.json): engram asks instruct models through their template; for a base model, drop --chat where a command has it"
    )]
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
