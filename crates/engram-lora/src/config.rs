//! The trainer's settings, [`TrainConfig`]: the one place their defaults live (EnronQA §6 —
//! 10 epochs, lr 1e-4 with one epoch of linear warm-up then linear decay, batch 8, AdamW without
//! weight decay — and transformers' Trainer's gradient-norm clip of 1.0). Training presets,
//! `engram train` and the sweep all start from these.

use serde::{Deserialize, Serialize};

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
}
