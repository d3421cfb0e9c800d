//! engram's Llama-family decoder in Burn, with transformers-exact numerics.
//!
//! The backend is chosen at run time through a [`burn::tensor::Device`] (see [`device`]); the
//! model code is the same for the CPU (`flex`), `wgpu` and `cuda`. HF checkpoints are used as
//! stored: q/k rows stay in HF's rotate-half layout and RoPE is applied in that form, so weights
//! (and later LoRA factors) need no permutation in either direction.

pub mod attention;
pub mod block;
pub mod config;
pub mod cpu_matmul;
pub mod device;
pub mod error;
pub mod generate;
pub mod kv_cache;
pub mod linear;
pub mod llama;
pub mod load;
pub mod lora;
pub mod mask;
pub mod mlp;
pub mod norm;
pub mod rope;
pub mod sampling;

pub use burn;
pub use config::{LlamaConfig, RopeScaling};
pub use device::{available_backends, device_from_name};
pub use error::{ModelError, Result};
pub use generate::{Generation, GenerationConfig, generate, generate_after_prefix};
pub use kv_cache::KvCache;
pub use llama::Llama;
pub use load::WeightDType;
pub use lora::{LoraAdapter, LoraConfig, LoraTarget};
pub use sampling::Sampling;
