//! Errors of training, adapter files and merging; messages name the file, key or value.

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum LoraError {
    /// From the model crate (bad LoRA config, shapes, generation).
    #[error(transparent)]
    Model(#[from] engram_model::ModelError),
    /// From the tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] engram_tokenizer::TokenizerError),
    /// From reading a checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] engram_checkpoint::CheckpointError),
    /// From reading facts.
    #[error(transparent)]
    Facts(#[from] engram_facts::FactsError),
    /// A file could not be written (atomically).
    #[error(transparent)]
    Write(#[from] engram_io::AtomicError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An adapter directory or file is unusable.
    #[error("{path}: {problem}")]
    BadAdapter {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A training setting is invalid.
    #[error("invalid training setting: {0}")]
    BadSetting(String),
    /// The between-epochs evaluation (`eval_every`) failed.
    #[error("evaluating after epoch {epoch} (eval_every): {message}")]
    Eval {
        /// 1-based epoch.
        epoch: usize,
        /// What went wrong.
        message: String,
    },
    /// A training example does not fit the context window.
    #[error(
        "fact `{id}`: the training example is {len} tokens, longer than the context window of {window} (shorten the fact or raise --max-len)"
    )]
    TooLong {
        /// The fact.
        id: String,
        /// Its tokens.
        len: usize,
        /// The limit.
        window: usize,
    },
    /// The loss became NaN or infinite; the run ends (recorded, not a crash).
    #[error("training diverged: loss {loss} at epoch {epoch}, step {step} (lr {lr:e})")]
    NonFiniteLoss {
        /// 1-based epoch.
        epoch: usize,
        /// 1-based optimizer step.
        step: usize,
        /// The loss value.
        loss: f64,
        /// The learning rate of that step.
        lr: f64,
    },
    /// The device failed running training steps (out of memory, a kernel that could not
    /// launch); the run ends there, recorded as `failed`, its checkpoints kept.
    #[error(
        "the {device} device failed in epoch {epoch}, {}: {message}{hint}; {}",
        crate::losses::step_span(*first_step, *last_step),
        match saved { 0 => "no epoch was checkpointed yet".to_string(), k => format!("the newest checkpoint holds epoch {k}, where a resumed run continues") }
    )]
    Device {
        /// The device (`NVIDIA H200`, `llvmpipe (…)`).
        device: String,
        /// 1-based epoch.
        epoch: usize,
        /// First step whose work was pending when the failure surfaced (1-based).
        first_step: usize,
        /// Last such step (1-based).
        last_step: usize,
        /// The device's error, one line.
        message: String,
        /// What it says about memory ([`engram_model::memory_hint`]), or empty.
        hint: String,
        /// Epochs finished and checkpointed.
        saved: usize,
    },
    /// A checkpoint to resume from does not belong to this run.
    #[error("{path}: cannot resume: {problem}")]
    Resume {
        /// The checkpoint.
        path: PathBuf,
        /// What differs.
        problem: String,
    },
    /// Training was asked to stop ([`engram_io::Stop`]: a signal) and ended at a step
    /// boundary; the steps of the unfinished epoch are dropped, its checkpoints are kept.
    #[error(
        "stopped by signal {signal} in epoch {epoch}; {}",
        match saved { 0 => "no epoch was checkpointed yet".to_string(), k => format!("the newest checkpoint holds epoch {k}, where a resumed run continues") }
    )]
    Stopped {
        /// The signal that asked.
        signal: usize,
        /// The epoch that was running (1-based).
        epoch: usize,
        /// Epochs finished and checkpointed.
        saved: usize,
    },
}

impl LoraError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| LoraError::Io { path, source }
    }

    /// A bad adapter file.
    pub fn adapter(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        LoraError::BadAdapter {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = LoraError> = std::result::Result<T, E>;
