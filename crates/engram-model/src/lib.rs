//! engram's Llama-family decoder in Burn, with transformers-exact numerics.
//!
//! Start here: a [`Session`] loads a checkpoint onto a device (the backend chosen at run time,
//! see [`device`]) with its tokenizer; [`generate`] decodes batches with a KV cache;
//! [`answer`] turns questions into greedy answers (every method of the table ends there). The
//! model itself: [`llama`] (embeddings, [`block`]s of [`attention`] and [`mlp`], [`norm`],
//! [`rope`]), loaded by [`load`]. LoRA: the adapter layer in [`lora`], attached to a model by
//! [`adapters`]. HF checkpoints are used as stored: q/k rows stay in HF's rotate-half layout
//! and RoPE is applied in that form, so weights and LoRA factors need no permutation.

pub mod adapters;
pub mod answer;
pub mod attention;
pub mod block;
pub mod config;
pub mod error;
pub mod generate;
pub mod kv_cache;
pub mod linear;
pub mod llama;
pub mod load;
pub mod lora;
pub mod mlp;
pub mod norm;
pub mod rope;
pub mod sampling;
pub mod session;

pub use answer::{
    Answer, AnswerConfig, answer_prompts, answer_questions, answers_from, question_prompt,
};
pub use burn;
pub use config::{Architecture, LlamaConfig, RopeScaling};
// The devices, the kernel cache and the CPU products are engram-ops' (the operations and their
// backends); re-exported here, where callers of the model find them.
pub use engram_ops::device::{
    available_backends, backend_kind, cuda_compiler, device_from_name, device_label, device_memory,
    device_name, is_cpu, open_device,
};
#[doc(hidden)]
pub use engram_ops::testing;
pub use engram_ops::{LaunchCounter, cpu_matmul, device, kernel_cache, launches, mask};
pub use error::{ModelError, Result};
pub use generate::{
    Generation, GenerationConfig, forced_logprobs, generate, generate_after_prefix,
};
pub use kv_cache::KvCache;
pub use llama::Llama;
pub use load::WeightDType;
pub use lora::{LoraAdapter, LoraConfig, LoraSettings, LoraTarget};
pub use sampling::Sampling;
pub use session::{Session, SessionSpec};
