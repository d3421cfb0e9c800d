//! What a training run reports: one [`EpochRecord`] per epoch and the [`TrainRecord`] of the
//! run, written to `OUT/train_record.json` (also when it diverges).

use engram_model::kernel_cache::CompileSummary;
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::fixed_steps::StepShape;

/// The file a run writes its [`TrainRecord`] to, in its output directory.
pub const TRAIN_RECORD: &str = "train_record.json";

/// What one epoch did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EpochRecord {
    /// 1-based epoch.
    pub epoch: usize,
    /// Mean loss over the epoch's label tokens.
    pub loss: f64,
    /// Optimizer steps.
    pub steps: usize,
    /// Non-padding tokens processed.
    pub tokens: usize,
    /// Label tokens.
    pub label_tokens: usize,
    /// Wall seconds of the epoch's training loop.
    pub seconds: f64,
    /// `tokens / seconds`.
    pub tokens_per_s: f64,
    /// Learning rate of the epoch's last step.
    pub lr: f64,
    /// What the run's [`crate::EpochEval`] measured after this epoch (`eval_every`): in a sweep,
    /// the greedy exact match on a fixed sample of the trained questions, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<f64>,
}

impl EpochRecord {
    /// One line for logs: epoch, loss, tokens, seconds, tokens/s.
    pub fn summary(&self) -> String {
        let em = self
            .exact_match
            .map_or(String::new(), |e| format!("  exact match {e:.3}"));
        format!(
            "epoch {:>3}  loss {:.4}  {} tokens  {:.1}s  {:.0} tok/s{em}",
            self.epoch, self.loss, self.tokens, self.seconds, self.tokens_per_s
        )
    }
}

/// The record of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainRecord {
    /// `running`, `finished`, `diverged`, `stopped` (asked to stop; resumable) or `failed` (the
    /// device failed; resumable from the last checkpoint).
    pub status: String,
    /// The error that ended the run, if any.
    pub error: Option<String>,
    /// The base model.
    pub base_model: String,
    /// Facts trained on.
    pub facts: usize,
    /// LoRA rank.
    pub rank: usize,
    /// LoRA alpha.
    pub alpha: f64,
    /// Adapter parameters.
    pub trainable_params: usize,
    /// All parameters.
    pub total_params: usize,
    /// Settings.
    pub train: TrainConfig,
    /// Epoch the run resumed after, if it did.
    pub resumed_after_epoch: Option<usize>,
    /// Per-epoch records (including those before a resume).
    pub epochs: Vec<EpochRecord>,
    /// GPU kernels compiled and autotune decisions made by this run (this process's part of
    /// it, from its model on the device to its end: finished, stopped or diverged), on a GPU
    /// backend; absent on the CPU and while the run goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<CompileSummary>,
    /// How a `graph = true` run took its steps (this process's capture); absent otherwise, and
    /// where the epochs were too short to capture (four steps an epoch are needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_graph: Option<StepGraphRecord>,
}

impl TrainRecord {
    /// Each epoch's mean loss, in order.
    pub fn epoch_losses(&self) -> Vec<f64> {
        self.epochs.iter().map(|e| e.loss).collect()
    }
}

/// How a `graph = true` run captured its optimizer step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepGraphRecord {
    /// Whether the steps after the capture were replays of a recorded graph (false on the CPU
    /// backend, which runs the step's code each time).
    pub hardware: bool,
    /// Seconds the capture took, its three warm-up steps included.
    pub capture_seconds: f64,
    /// The one shape of every step.
    pub shape: StepShape,
}
