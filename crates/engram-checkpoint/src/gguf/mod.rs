//! GGUF files (llama.cpp's format): container parsing, dequantization, and the llama
//! architecture's mapping to HF names and layouts.

mod dequant;
mod encode;
mod file;
mod hf_config;
mod hf_tokenizer;
mod llama;
mod mix;
mod permute;
mod value;
mod writer;

pub use dequant::{GgmlType, dequantize, ggml_type_name};
pub use encode::encode;
pub use file::{GgufFile, GgufTensor};
pub use llama::{GGUF_ARCHITECTURES, GgufLlama};
pub use mix::{GgufMix, MixModel};
pub use permute::permute_rows;
pub use value::GgufValue;
pub use writer::{GgufWriter, WriterTensor};
