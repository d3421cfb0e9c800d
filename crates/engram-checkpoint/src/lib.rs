//! Checkpoint readers for engram: HF safetensors directories (single file or sharded, memory-
//! mapped and read tensor by tensor), llama-architecture GGUF files (F32, F16, BF16, Q8_0, Q4_0,
//! Q4_1 dequantized at load, llama.cpp's q/k row permutation undone), and Hugging Face hub repo
//! ids resolved through the standard HF cache.
//!
//! Nothing here depends on a tensor library: tensors come out as [`HostTensor`]s in HF layout.

pub mod checkpoint;
pub mod error;
pub mod gguf;
pub mod host_tensor;
pub mod hub;
pub mod model_store;
pub mod safetensors_dir;
pub mod tensor_source;

pub use checkpoint::{Checkpoint, TokenizerFiles};
pub use error::{CheckpointError, Result};
pub use host_tensor::{FloatFormat, HostTensor, decode_f32};
pub use safetensors_dir::SafetensorsCheckpoint;
pub use tensor_source::{TensorInfo, TensorSource};
