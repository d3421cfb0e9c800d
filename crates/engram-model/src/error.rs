//! Errors of model building, loading and generation.

use engram_checkpoint::CheckpointError;

/// What went wrong while building or running a model. Messages name the file, tensor or key.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Reading the checkpoint failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The config names an architecture engram does not implement.
    #[error("{origin}: unsupported architecture `{architecture}` (engram runs {supported})")]
    UnknownArchitecture {
        /// The config file.
        origin: String,
        /// What it names.
        architecture: String,
        /// The architectures engram runs.
        supported: String,
    },
    /// A config key is missing, mistyped or out of range.
    #[error("{origin}: config key `{key}` {problem}")]
    BadConfig {
        /// The config file.
        origin: String,
        /// The key.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// A tensor has a shape other than the config implies.
    #[error("{origin}: tensor {name} has shape {found:?}, expected {expected:?} from the config")]
    WrongShape {
        /// The checkpoint.
        origin: String,
        /// The tensor.
        name: String,
        /// Shape in the file.
        found: Vec<usize>,
        /// Shape the config implies.
        expected: Vec<usize>,
    },
    /// Building the tokenizer or encoding a prompt failed.
    #[error(transparent)]
    Tokenizer(#[from] engram_tokenizer::TokenizerError),
    /// A weight dtype engram does not know.
    #[error("unknown weight dtype `{name}` (f32, bf16, f16)")]
    UnknownDtype {
        /// What was asked for.
        name: String,
    },
    /// The device cannot hold weights in this dtype (wgpu's WGSL and llvmpipe have no bf16, for two).
    #[error("the device {device} does not support {dtype} weights: use --dtype f32 there")]
    UnsupportedDtype {
        /// The dtype asked for.
        dtype: String,
        /// The device.
        device: String,
    },
    /// The device cannot run the adapters' matmuls in this dtype (`adapter_compute`).
    #[error(
        "the device {device} cannot run the adapters' matmuls in {dtype} (adapter_compute = \"{dtype}\"): use f32 there"
    )]
    UnsupportedAdapterCompute {
        /// The dtype asked for.
        dtype: String,
        /// The device.
        device: String,
    },
    /// A backend that does not exist in this build or cannot start here.
    #[error(transparent)]
    Device(#[from] engram_ops::DeviceError),
    /// A bad LoRA setting or adapter (rank 0, unknown target module, shape mismatch...).
    #[error("{0}")]
    BadLora(String),
    /// A bad argument to generation (empty prompt, a prompt longer than the context...).
    #[error("{0}")]
    Generation(String),
    /// The device failed running the work (out of memory, a kernel that could not launch);
    /// it surfaces at the next read back to the host.
    #[error(
        "the {device} device failed: {message}{}",
        crate::memory_hint(
            message,
            "fewer or shorter prompts at once (a smaller batch) need less"
        )
    )]
    DeviceFailed {
        /// The device (`NVIDIA H200`, `llvmpipe (…)`).
        device: String,
        /// Its error, one line ([`crate::device_message`]).
        message: String,
    },
    /// A weight tensor is larger than the device holds in one buffer: the model cannot be
    /// loaded there at all (found before anything is loaded).
    #[error(
        "{tensor} is {} in {dtype}, more than the {device} device holds in one buffer ({}): this model's shape cannot be loaded there (a limit of the device, not of its free memory); use another device (CUDA, or a discrete GPU's Vulkan driver)",
        crate::error::mib(*bytes),
        crate::error::mib(*max)
    )]
    BufferTooLarge {
        /// The tensor (`model.embed_tokens.weight`, or a joined projection).
        tensor: String,
        /// Its bytes.
        bytes: u64,
        /// Its dtype.
        dtype: String,
        /// The device.
        device: String,
        /// The most bytes the device holds in one buffer.
        max: u64,
    },
    /// Answering was asked to stop ([`engram_io::Stop`]: a signal) and ended between
    /// generation batches; the answers made so far are dropped.
    #[error("stopped by signal {signal} after {answered} of {total} answers")]
    Stopped {
        /// The signal that asked.
        signal: usize,
        /// Answers finished.
        answered: usize,
        /// Answers asked for.
        total: usize,
    },
}

/// Result alias of this crate.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;

/// `bytes` in MiB, for messages.
pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
}
