//! The trainer's settings, [`TrainConfig`]: the one place their defaults live (EnronQA §6 —
//! 10 epochs, lr 1e-4 with one epoch of linear warm-up then linear decay, batch 8, AdamW without
//! weight decay — and transformers' Trainer's gradient-norm clip of 1.0). Training presets,
//! `engram train` and the sweep all start from these.

use serde::{Deserialize, Serialize};

/// How a micro-batch's examples are laid out for the forward pass.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum BatchLayout {
    /// One row per example, right-padded to the micro-batch's longest (transformers' default
    /// collator).
    #[default]
    Padded,
    /// Examples placed end to end into rows of [`TrainConfig::pack_length`] slots, each with its
    /// own positions and seeing only itself (a block-diagonal causal mask), loss on its answer
    /// tokens only: the padded layout's loss and gradients in exact arithmetic (float rounding
    /// aside; dropout draws other masks for the other shape), fewer padding slots and a handful
    /// of distinct shapes per run, so that autotune and fusion caches hit.
    Packed,
}

impl BatchLayout {
    /// Whether this is the default layout (left out of serialized settings, so that the
    /// fingerprints and config hashes of runs made before packing existed stay as they were).
    pub fn is_padded(&self) -> bool {
        *self == BatchLayout::Padded
    }
}

/// The dtype of the adapters' matmuls while training.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum AdapterCompute {
    /// f32 whatever the base dtype (PEFT's `autocast_adapter_dtype`): exact.
    #[default]
    F32,
    /// bf16 matmuls with f32 master weights, gradients and optimizer state, as PEFT under
    /// `torch.autocast(bfloat16)`: the adapter input, factors and product are rounded to bf16.
    Bf16,
}

impl AdapterCompute {
    /// Whether this is the default (left out of serialized settings, see
    /// [`BatchLayout::is_padded`]).
    pub fn is_f32(&self) -> bool {
        *self == AdapterCompute::F32
    }

    /// The setting's name, as presets and flags spell it.
    pub fn name(self) -> &'static str {
        match self {
            AdapterCompute::F32 => "f32",
            AdapterCompute::Bf16 => "bf16",
        }
    }

    /// The Burn dtype.
    pub fn dtype(self) -> burn::tensor::DType {
        match self {
            AdapterCompute::F32 => burn::tensor::DType::F32,
            AdapterCompute::Bf16 => burn::tensor::DType::BF16,
        }
    }
}

impl std::str::FromStr for AdapterCompute {
    type Err = String;

    /// `f32` or `bf16`.
    fn from_str(name: &str) -> Result<Self, String> {
        [AdapterCompute::F32, AdapterCompute::Bf16]
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| format!("`{name}`: the adapter compute is f32 or bf16"))
    }
}

/// Packed row lengths are rounded up to a multiple of this.
pub const PACK_MULTIPLE: usize = 64;

/// Training settings. Missing keys take their defaults when read from a preset.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TrainConfig {
    /// Passes over the facts.
    pub epochs: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Examples per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimizer step.
    pub grad_accum: usize,
    /// Warm-up length in epochs (may be fractional; 0 = none).
    pub warmup_epochs: f64,
    /// Decay the learning rate linearly to 0 after warm-up (else hold it constant).
    pub decay: bool,
    /// AdamW's decoupled weight decay.
    pub weight_decay: f64,
    /// Clip the global gradient norm to this value (`None` or 0: no clipping, as transformers'
    /// `max_grad_norm = 0`).
    pub max_grad_norm: Option<f64>,
    /// Seed of batch order and dropout (the adapter init seed is in the LoRA config).
    pub seed: u64,
    /// Longest example allowed (default: the model's context window).
    pub max_len: Option<usize>,
    /// Write a checkpoint after every epoch.
    pub checkpoints: bool,
    /// Checkpoints kept (the newest).
    pub keep_checkpoints: usize,
    /// Read the step losses back from the device every this many optimizer steps (and at every
    /// epoch's end): one transfer for all of them, so that no step waits for the device. The
    /// progress line's loss lags by up to this many steps, and a diverged loss is caught (and
    /// named by its own step) at the next read. 0 counts as 1. Not an outcome setting: it
    /// changes neither the adapter nor a run's fingerprint.
    pub log_every: usize,
    /// How micro-batches are laid out: `padded` (default) or `packed` ([`BatchLayout`]).
    #[serde(skip_serializing_if = "BatchLayout::is_padded")]
    pub layout: BatchLayout,
    /// Slots per packed row (`layout = "packed"` only; default: the run's longest example rounded
    /// up to a multiple of [`PACK_MULTIPLE`]). A fixed length keeps the number of distinct batch
    /// shapes small.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pack_length: Option<usize>,
    /// The adapters' matmul dtype: `f32` (default) or `bf16` ([`AdapterCompute`]). The trained
    /// model answers with the same setting.
    #[serde(skip_serializing_if = "AdapterCompute::is_f32")]
    pub adapter_compute: AdapterCompute,
    /// Every this many epochs, and after the last, the trainer asks its [`crate::EpochEval`] how
    /// well the model answers so far (a sweep: the greedy exact match on a fixed sample of the
    /// trained questions) and keeps the figure in that epoch's record: a memorization curve.
    /// 0 (default) = never. Left out of serialized settings when 0, so that the fingerprints and
    /// config hashes of runs without it stay as they were.
    #[serde(skip_serializing_if = "is_zero")]
    pub eval_every: usize,
    /// Questions in that sample (default [`DEFAULT_EVAL_SAMPLE`]; all facts when there are fewer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_sample: Option<usize>,
    /// Capture the optimizer step once as a graph and replay it (a CUDA graph on CUDA, CubeCL's
    /// software graph on wgpu): each step's launches then cost no host work. Every step is laid
    /// out in the run's one shape — micro-batches right-padded to the run's longest example —
    /// so the padded layout only. Two numeric differences from the eager step: dropout masks
    /// are another stream of the same distribution, and AdamW's bias corrections and the
    /// learning rate's product are rounded in f32 (torch's `capturable=True`). The CPU backend
    /// has no graphs: the same step runs eagerly. Off by default; left out of serialized
    /// settings when off (see [`BatchLayout::is_padded`]).
    #[serde(skip_serializing_if = "is_false")]
    pub graph: bool,
}

/// Questions in the sample that `eval_every` asks, unless `eval_sample` says otherwise.
pub const DEFAULT_EVAL_SAMPLE: usize = 32;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            epochs: 10,
            lr: 1e-4,
            batch_size: 8,
            grad_accum: 1,
            warmup_epochs: 1.0,
            decay: true,
            weight_decay: 0.0,
            // transformers' Trainer (the paper's TOFU setup) clips at 1.0 by default.
            max_grad_norm: Some(1.0),
            seed: 0,
            max_len: None,
            checkpoints: true,
            keep_checkpoints: 1,
            log_every: 16,
            layout: BatchLayout::Padded,
            pack_length: None,
            adapter_compute: AdapterCompute::F32,
            eval_every: 0,
            eval_sample: None,
            graph: false,
        }
    }
}

impl TrainConfig {
    /// The clipping threshold, if clipping is on.
    pub fn clip(&self) -> Option<f64> {
        self.max_grad_norm.filter(|&n| n != 0.0)
    }

    /// Steps between loss reads (at least 1).
    pub fn read_interval(&self) -> usize {
        self.log_every.max(1)
    }

    /// Whether epoch `epoch` (1-based) is one that `eval_every` evaluates: every `eval_every`-th
    /// and the last.
    pub fn evaluates_after(&self, epoch: usize) -> bool {
        self.eval_every > 0 && (epoch.is_multiple_of(self.eval_every) || epoch == self.epochs)
    }

    /// Questions in the `eval_every` sample.
    pub fn eval_sample_size(&self) -> usize {
        self.eval_sample.unwrap_or(DEFAULT_EVAL_SAMPLE)
    }

    /// The packed row length for examples whose longest has `longest` tokens, or `None` for the
    /// padded layout; an error names `pack_length` when it is shorter than that example.
    pub fn packed_rows(&self, longest: usize) -> Result<Option<usize>, String> {
        if self.layout.is_padded() {
            return Ok(None);
        }
        let len = self
            .pack_length
            .unwrap_or_else(|| longest.div_ceil(PACK_MULTIPLE).max(1) * PACK_MULTIPLE);
        if len < longest {
            return Err(format!(
                "pack_length = {len} is shorter than the longest training example ({longest} tokens)"
            ));
        }
        Ok(Some(len))
    }

    /// The settings as a JSON object without the keys that only say how a run reports and keeps
    /// its files (`checkpoints`, `keep_checkpoints`, `log_every`), in declaration order.
    pub fn outcome_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("train config serializes");
        let o = v.as_object_mut().expect("object");
        for k in ["checkpoints", "keep_checkpoints", "log_every"] {
            o.shift_remove(k);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_settings_take_the_defaults() {
        let c: TrainConfig = serde_json::from_str(r#"{"lr": 2e-3, "max_grad_norm": 0}"#).unwrap();
        assert_eq!(c.lr, 2e-3);
        assert_eq!(c.epochs, 10);
        assert_eq!(c.clip(), None);
        assert_eq!(TrainConfig::default().clip(), Some(1.0));
    }

    #[test]
    fn packing_is_opt_in_and_its_row_length_covers_the_longest_example() {
        let padded = TrainConfig::default();
        assert_eq!(padded.packed_rows(100), Ok(None));
        let json = serde_json::to_string(&padded).unwrap();
        assert!(
            !json.contains("layout") && !json.contains("pack_length"),
            "{json}"
        );
        let packed: TrainConfig = serde_json::from_str(r#"{"layout": "packed"}"#).unwrap();
        assert_eq!(packed.packed_rows(100), Ok(Some(128)));
        assert_eq!(packed.packed_rows(128), Ok(Some(128)));
        assert_eq!(packed.packed_rows(1), Ok(Some(64)));
        assert!(
            serde_json::to_string(&packed)
                .unwrap()
                .contains(r#""layout":"packed""#)
        );
        let short = TrainConfig {
            pack_length: Some(50),
            ..packed
        };
        let err = short.packed_rows(60).unwrap_err();
        assert!(
            err.contains("pack_length = 50") && err.contains("60 tokens"),
            "{err}"
        );
        assert!(serde_json::from_str::<TrainConfig>(r#"{"layout": "pack"}"#).is_err());
    }
}
