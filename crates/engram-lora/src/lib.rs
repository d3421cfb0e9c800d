//! LoRA memorization on engram's Llama.
//!
//! Start here: a [`Trainer`] takes a model, a [`engram_model::LoraConfig`] and a
//! [`TrainConfig`] (whose `Default` is the one home of the training defaults, EnronQA §6's) and
//! trains adapters on facts — [`build_examples`] turns facts into chat-formatted examples, the
//! batches are length-grouped (or packed into fixed-length rows: [`epoch_layout`] shows both),
//! [`gradients`] computes one optimizer step without reading the device (its phases visible to a
//! [`StepObserver`]), [`FlatLayout`] lays the adapters' gradients, values and moments end to end,
//! [`AdamW`] applies the step (one fused pass per bucket), [`LossLog`] reads the step losses back
//! once per logging interval, and every epoch is checkpointed so that `--resume` ends on the same
//! adapter. [`save_adapter`] / [`load_adapter`] write and read PEFT's adapter layout;
//! [`merge_to_hf`] and [`merge_to_gguf`] fold an adapter into its base; [`write_gguf_adapter`]
//! writes llama.cpp's adapter file. Answering with the trained model is
//! [`engram_model::answer_questions`]' job.
//!
//! The modules are private: what callers need is re-exported here.

mod adamw;
mod batches;
mod checkpoint;
mod config;
mod epoch_eval;
mod error;
mod examples;
mod fixed_steps;
mod flat;
mod gguf_adapter;
mod gguf_merge;
mod graph;
mod loss;
mod losses;
mod merge;
mod optimizer_state;
mod pack;
mod peft;
mod probe;
mod record;
mod schedule;
mod step;
mod stepper;
mod trainer;

pub use adamw::{AdamW, AdamWSettings, ClippedGradients};
pub use config::{AdapterCompute, BatchLayout, DEFAULT_EVAL_SAMPLE, TrainConfig};
pub use epoch_eval::EpochEval;
pub use error::{LoraError, Result};
pub use examples::{TrainExample, build_examples};
pub use fixed_steps::{StepData, StepShape, StepSlots};
pub use flat::{ALIGN, AdapterGrads, FlatLayout};
pub use gguf_adapter::{GgufAdapterSummary, GgufAdapterType, write_gguf_adapter};
pub use gguf_merge::{MergedGguf, merge_to_gguf};
pub use graph::{CapturedStep, WARM_UP_STEPS};
pub use loss::{Batch, BatchInputs, batch_loss, inputs_loss};
pub use losses::{LossLog, ReadError, StepLoss, host_reads, step_span};
pub use merge::merge_to_hf;
pub use optimizer_state::{
    LEGACY_OPTIMIZER_STATE, OPTIMIZER_STATE, load as load_optimizer_state,
    save as save_optimizer_state,
};
pub use pack::{LayoutFigures, epoch_layout};
pub use peft::{ADAPTER_CONFIG, ADAPTER_WEIGHTS, PeftAdapter, load_adapter, save_adapter};
pub use probe::{
    ProbeDistance, StepProbe, gradient_probe, host_adapter, probe_distance, update_distance,
    update_probe,
};
pub use record::{EpochRecord, StepGraphRecord, TRAIN_RECORD, TrainRecord};
pub use step::{
    StepGradients, StepObserver, StepPhase, Unobserved, clip_factor, gradients, inputs_gradients,
    observed_gradients, optimizer, optimizer_settings, update,
};
pub use trainer::{TrainOutcome, Trainer, check_settings};
