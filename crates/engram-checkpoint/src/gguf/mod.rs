//! GGUF files (llama.cpp's format): container parsing, dequantization, and the llama
//! architecture's mapping to HF names and layouts.

pub mod dequant;
pub mod file;
pub mod hf_config;
pub mod hf_tokenizer;
pub mod llama;
pub mod permute;
pub mod value;
pub mod writer;

pub use dequant::{GgmlType, dequantize};
pub use file::{GgufFile, GgufTensor};
pub use llama::GgufLlama;
pub use value::GgufValue;
pub use writer::{GgufWriter, WriterTensor};
