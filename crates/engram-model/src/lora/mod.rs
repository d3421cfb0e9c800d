//! Low-rank adapters on the block's linear layers, numerically as HF PEFT's `LoraLayer`:
//! `y = base(x) + s · B(A(dropout(x)))` with `s = alpha / r` (or `alpha / √r` with rsLoRA).
//!
//! The delta is two skinny matmuls (`x·A` then `·B`); the dense `in × out` product is never
//! formed in the forward pass (Burn's built-in `apply_lora` forms it every call). Factors are
//! f32 whatever the base dtype (PEFT's `autocast_adapter_dtype` default); the input is cast to
//! f32 for the adapter and the delta cast back to the base's dtype.
//!
//! - [`target`]: which linear layers can be adapted; [`config`]: the settings and their
//!   defaults; [`adapter`]: one adapter; [`dropout`]: the CPU backend's host-drawn masks.
//! - Attaching adapters to a model lives in [`crate::adapters`].

pub mod adapter;
pub mod config;
pub mod dropout;
pub mod target;

pub use adapter::LoraAdapter;
pub use config::{LoraConfig, LoraSettings};
pub use target::LoraTarget;
