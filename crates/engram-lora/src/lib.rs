//! LoRA memorization on engram's Llama: the trainer (TOFU / EnronQA conventions), per-epoch
//! checkpoints with exact resume, PEFT-format adapter export and import, merging into an HF
//! checkpoint, and batched greedy answers for evaluation.

pub mod atomic;
pub mod batches;
pub mod checkpoint;
pub mod error;
pub mod eval;
pub mod examples;
pub mod loss;
pub mod merge;
pub mod peft;
pub mod schedule;
pub mod trainer;

pub use error::{LoraError, Result};
pub use eval::{
    Answer, AnswerConfig, answer_prompts, answer_questions, answers_from, exact_match,
    normalize_answer,
};
pub use examples::{TrainExample, build_examples};
pub use merge::merge_to_hf;
pub use peft::{PeftAdapter, load_adapter, save_adapter};
pub use trainer::{EpochRecord, TrainConfig, TrainOutcome, TrainRecord, Trainer};
