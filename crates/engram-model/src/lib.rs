//! engram's Llama-family decoder in Burn, with transformers-exact numerics.
//!
//! Start here: a [`Session`] loads a checkpoint onto a device (the backend chosen at run time,
//! see [`device`]) with its tokenizer; [`generate()`] decodes batches with a KV cache;
//! [`answer_questions`] turns questions into greedy answers (every method of the table ends
//! there). The model itself: [`Llama`] (embeddings, blocks of attention and a SwiGLU MLP,
//! RMSNorm, RoPE — the custom ops under them are engram-ops'), configured by [`LlamaConfig`]
//! (one decoder for every [`Architecture`]). LoRA: the adapter layer [`LoraAdapter`], attached
//! to a model by [`Llama::with_lora`]. HF checkpoints are used as stored: q/k rows stay in HF's
//! rotate-half layout and RoPE is applied in that form, so weights and LoRA factors need no
//! permutation.
//!
//! The model's own modules are private: what callers need is re-exported here.

mod adapters;
mod answer;
mod attention;
mod block;
mod config;
mod error;
mod generate;
mod kv_cache;
mod linear;
mod llama;
mod load;
mod lora;
mod mlp;
mod norm;
mod rope;
mod sampling;
mod session;

pub use answer::{
    Answer, AnswerConfig, answer_prompts, answer_questions, answers_from, question_prompt,
};
pub use burn;
pub use config::{Architecture, LlamaConfig, RopeScaling};
// The devices, the kernel cache and the CPU products are engram-ops' (the operations and their
// backends); re-exported here, where callers of the model find them.
pub use adapters::check_adapter_compute;
pub use attention::fused_attention;
pub use engram_ops::device::{
    TF32_VAR, WGPU_COMPILER_VAR, available_backends, backend_kind, cuda_compiler, cuda_tf32,
    device_from_name, device_label, device_memory, device_name, is_cpu, is_gpu_backend,
    open_device, wgpu_compiler,
};
#[doc(hidden)]
pub use engram_ops::testing;
pub use engram_ops::{
    KernelTimes, LaunchCounter, cpu_matmul, device, device_message, kernel_cache, launches, mask,
    memory_hint, selfcheck,
};
pub use error::{ModelError, Result};
pub use generate::{
    Generation, GenerationConfig, forced_logprobs, generate, generate_after_prefix,
};
pub use kv_cache::KvCache;
pub use linear::{Joined, Linear};
pub use llama::{Llama, ids_tensor};
pub use load::WeightDType;
pub use lora::dropout::{KeyScope, keyed_dropout};
pub use lora::{LoraAdapter, LoraConfig, LoraSettings, LoraTarget};
pub use sampling::{Sampling, argmax};
pub use session::{Session, SessionSpec};
