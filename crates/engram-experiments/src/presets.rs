//! Presets: the model, training and judge settings that experiments name (`configs/models/`,
//! `configs/training/`, `configs/judges/`). Every table rejects keys it does not know.

use engram_lora::TrainConfig;
use engram_model::{LoraConfig, LoraTarget, ModelError};
use serde::{Deserialize, Serialize};

/// A model preset (`configs/models/NAME.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPreset {
    /// What to load: an HF directory, a `.gguf` file, a registry alias
    /// (`smollm2-135m-instruct`) or a hub repo id (`owner/name[@revision]`). A relative path is
    /// taken from the preset file's directory when it exists there.
    pub source: String,
    /// Weight dtype on the device: f32, bf16 or f16.
    #[serde(default = "default_dtype")]
    pub dtype: String,
    /// Long-context window in tokens (default: the model's `max_position_embeddings`).
    #[serde(default)]
    pub context_window: Option<usize>,
    /// A copy of the model's `config.json` (relative to the preset file), so that `--dry-run`
    /// can estimate time and memory without downloading the checkpoint.
    #[serde(default)]
    pub architecture: Option<String>,
}

fn default_dtype() -> String {
    "f32".into()
}

/// A training preset (`configs/training/NAME.toml`): the LoRA setup and the trainer. Defaults
/// are EnronQA §6's: alpha = 4 × rank, dropout 0.05, every linear layer, 10 epochs, lr 1e-4.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingPreset {
    /// lora_alpha = alpha_per_rank × rank.
    #[serde(default = "four")]
    pub alpha_per_rank: f64,
    /// Dropout on the adapter input.
    #[serde(default = "dropout")]
    pub dropout: f64,
    /// rsLoRA scaling (alpha / √r).
    #[serde(default)]
    pub rslora: bool,
    /// Adapted modules.
    #[serde(default = "all_targets")]
    pub targets: Vec<String>,
    /// Adapted layers (default all).
    #[serde(default)]
    pub layers: Option<Vec<usize>>,
    /// Epochs.
    #[serde(default = "ten")]
    pub epochs: usize,
    /// Peak learning rate.
    #[serde(default = "lr")]
    pub lr: f64,
    /// Examples per micro-batch.
    #[serde(default = "eight")]
    pub batch_size: usize,
    /// Micro-batches per optimizer step.
    #[serde(default = "one")]
    pub grad_accum: usize,
    /// Linear warm-up in epochs.
    #[serde(default = "one_f")]
    pub warmup_epochs: f64,
    /// Linear decay to 0 after warm-up (false: constant).
    #[serde(default = "yes")]
    pub decay: bool,
    /// AdamW weight decay.
    #[serde(default)]
    pub weight_decay: f64,
    /// Global gradient-norm clip.
    #[serde(default)]
    pub max_grad_norm: Option<f64>,
    /// Seed of adapter init, batch order and dropout.
    #[serde(default)]
    pub seed: u64,
    /// Longest training example in tokens (default: the model's window).
    #[serde(default)]
    pub max_len: Option<usize>,
    /// Keep each LoRA cell's adapter under `work/` after the cell is done (its optimizer
    /// checkpoints are always removed then).
    #[serde(default = "yes")]
    pub keep_adapters: bool,
}

impl TrainingPreset {
    /// The adapter settings for `rank` (alpha = `alpha_per_rank` × rank; the seed also seeds the
    /// adapter's initialization). Fails on an unknown target module.
    pub fn lora_config(&self, rank: usize) -> Result<LoraConfig, ModelError> {
        Ok(LoraConfig::new(rank)
            .with_alpha(self.alpha_per_rank * rank as f64)
            .with_dropout(self.dropout)
            .with_rslora(self.rslora)
            .with_targets(LoraTarget::parse_list(&self.targets)?)
            .with_layers(self.layers.clone())
            .with_init_seed(self.seed))
    }

    /// The trainer settings: per-epoch checkpoints (the newest kept), a progress bar, no
    /// progress group.
    pub fn train_config(&self) -> TrainConfig {
        TrainConfig {
            epochs: self.epochs,
            lr: self.lr,
            batch_size: self.batch_size,
            grad_accum: self.grad_accum,
            warmup_epochs: self.warmup_epochs,
            decay: self.decay,
            weight_decay: self.weight_decay,
            max_grad_norm: self.max_grad_norm,
            seed: self.seed,
            max_len: self.max_len,
            ..TrainConfig::default()
        }
    }
}

fn four() -> f64 {
    4.0
}
fn dropout() -> f64 {
    0.05
}
fn all_targets() -> Vec<String> {
    engram_model::LoraTarget::ALL
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}
fn ten() -> usize {
    10
}
fn lr() -> f64 {
    1e-4
}
fn eight() -> usize {
    8
}
fn one() -> usize {
    1
}
fn one_f() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

/// A judge preset (`configs/judges/NAME.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum JudgePreset {
    /// Offline: normalized exact match.
    ExactMatch,
    /// Offline: token F1 against the gold answer at or above `threshold`.
    TokenF1 {
        /// Smallest F1 that counts as correct.
        #[serde(default = "half")]
        threshold: f64,
    },
    /// Offline: the answer contains at least `threshold` of the gold answer's tokens.
    GoldRecall {
        /// Smallest share of gold tokens (1.0: all of them).
        #[serde(default = "one_f")]
        threshold: f64,
    },
    /// An LLM behind an OpenAI-compatible endpoint (EnronQA: Llama-3.1-70B-Instruct).
    Openai {
        /// Base URL, e.g. `http://localhost:8000/v1`.
        base_url: String,
        /// The judge model.
        model: String,
        /// Environment variable holding the API key (the key itself never appears in files).
        #[serde(default)]
        api_key_env: Option<String>,
        /// The judge prompt (relative to the preset file).
        prompt: String,
        /// The persistent judge cache (default: `judge-cache.jsonl` in the results directory).
        #[serde(default)]
        cache: Option<String>,
        /// Requests in flight.
        #[serde(default = "four_usize")]
        concurrency: usize,
    },
}

fn half() -> f64 {
    0.5
}
fn four_usize() -> usize {
    4
}
