//! LoRA memorization on engram's Llama.
//!
//! Start here: a [`Trainer`] takes a model, a [`engram_model::LoraConfig`] and a
//! [`TrainConfig`] (whose `Default` is the one home of the training defaults, EnronQA §6's) and
//! trains adapters on facts — [`examples`] turns facts into chat-formatted examples, [`batches`]
//! orders them, [`pack`] packs a batch into fixed-length rows (`layout = "packed"`), [`step`]
//! computes one optimizer step without reading the device, [`flat`] lays the adapters' gradients,
//! values and moments end to end, [`adamw`] applies the step (one fused pass per bucket),
//! [`losses`] reads the step losses back once per logging interval, [`checkpoint`] saves every
//! epoch so that `--resume` ends on the same adapter. [`peft`] writes and reads PEFT's adapter layout;
//! [`merge`] folds an adapter into its base as an HF checkpoint. Answering with the trained
//! model is [`engram_model::answer`]'s job.

pub mod adamw;
pub mod batches;
pub mod checkpoint;
pub mod config;
pub mod epoch_eval;
pub mod error;
pub mod examples;
pub mod flat;
pub mod gguf_adapter;
pub mod gguf_merge;
pub mod loss;
pub mod losses;
pub mod merge;
pub mod optimizer_state;
pub mod pack;
pub mod peft;
pub mod probe;
pub mod record;
pub mod schedule;
pub mod step;
pub mod trainer;

pub use config::{AdapterCompute, BatchLayout, DEFAULT_EVAL_SAMPLE, TrainConfig};
pub use epoch_eval::EpochEval;
pub use error::{LoraError, Result};
pub use examples::{TrainExample, build_examples};
pub use gguf_adapter::{GgufAdapterSummary, GgufAdapterType, write_gguf_adapter};
pub use gguf_merge::{MergedGguf, merge_to_gguf};
pub use merge::merge_to_hf;
pub use peft::{PeftAdapter, load_adapter, save_adapter};
pub use record::{EpochRecord, TRAIN_RECORD, TrainRecord};
pub use trainer::{TrainOutcome, Trainer};
