//! Adapter hyper-parameters: [`LoraSettings`], the rank-independent settings a training preset
//! holds (and the one place their defaults live: EnronQA §6's alpha = 4 × rank, dropout 0.05,
//! every linear layer of every block), and [`LoraConfig`], those settings at one rank.

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};
use crate::lora::target::LoraTarget;

/// The adapter settings that do not depend on the rank (the LoRA keys of a training preset).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoraSettings {
    /// `lora_alpha = alpha_per_rank × rank`.
    pub alpha_per_rank: f64,
    /// Dropout on the adapter input.
    pub dropout: f64,
    /// rsLoRA scaling (`alpha / √r`).
    pub rslora: bool,
    /// Adapted modules.
    pub targets: Vec<LoraTarget>,
    /// Adapted layers (`None`: all).
    pub layers: Option<Vec<usize>>,
}

impl Default for LoraSettings {
    /// EnronQA §6: alpha = 4 × rank, dropout 0.05, all seven linear layers of every block.
    fn default() -> Self {
        Self {
            alpha_per_rank: 4.0,
            dropout: 0.05,
            rslora: false,
            targets: LoraTarget::ALL.to_vec(),
            layers: None,
        }
    }
}

impl LoraSettings {
    /// These settings at `rank` (alpha = `alpha_per_rank` × rank), A initialized from
    /// `init_seed`; targets named twice are adapted once.
    pub fn at_rank(&self, rank: usize, init_seed: u64) -> LoraConfig {
        let mut targets = Vec::new();
        for &t in &self.targets {
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
        LoraConfig {
            rank,
            alpha: self.alpha_per_rank * rank as f64,
            dropout: self.dropout,
            use_rslora: self.rslora,
            targets,
            layers: self.layers.clone(),
            init_seed,
        }
    }
}

/// Hyper-parameters of a set of adapters at one rank. [`LoraConfig::new`] takes its defaults
/// from [`LoraSettings::default`].
#[derive(Debug, Clone, PartialEq)]
pub struct LoraConfig {
    /// Rank `r` (≥ 1; may exceed a layer's full rank, as PEFT allows).
    pub rank: usize,
    /// `lora_alpha`.
    pub alpha: f64,
    /// Dropout on the adapter's input during training.
    pub dropout: f64,
    /// rsLoRA scaling `alpha / √r` instead of `alpha / r`.
    pub use_rslora: bool,
    /// Adapted modules.
    pub targets: Vec<LoraTarget>,
    /// Adapted layers (`None` = all), PEFT's `layers_to_transform`.
    pub layers: Option<Vec<usize>>,
    /// Seed of the `A` initialisation.
    pub init_seed: u64,
}

impl LoraConfig {
    /// The default setup ([`LoraSettings::default`], EnronQA §6's) at `rank`, init seed 0.
    pub fn new(rank: usize) -> Self {
        LoraSettings::default().at_rank(rank, 0)
    }

    /// Sets `lora_alpha`.
    pub fn with_alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// Sets the dropout probability.
    pub fn with_dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self
    }

    /// Turns rsLoRA scaling on or off.
    pub fn with_rslora(mut self, on: bool) -> Self {
        self.use_rslora = on;
        self
    }

    /// Sets the adapted modules.
    pub fn with_targets(mut self, targets: Vec<LoraTarget>) -> Self {
        self.targets = targets;
        self
    }

    /// Restricts adapters to these layers.
    pub fn with_layers(mut self, layers: Option<Vec<usize>>) -> Self {
        self.layers = layers;
        self
    }

    /// Sets the initialisation seed.
    pub fn with_init_seed(mut self, seed: u64) -> Self {
        self.init_seed = seed;
        self
    }

    /// `alpha / r`, or `alpha / √r` with rsLoRA.
    pub fn scaling(&self) -> f64 {
        if self.use_rslora {
            self.alpha / (self.rank as f64).sqrt()
        } else {
            self.alpha / self.rank as f64
        }
    }

    /// Checks the values against a model with `num_layers` blocks.
    pub fn validate(&self, num_layers: usize) -> Result<()> {
        self.validate_values()?;
        if let Some(&l) = self.layers.iter().flatten().find(|&&l| l >= num_layers) {
            return Err(ModelError::BadLora(format!(
                "layer {l} does not exist (the model has {num_layers} layers)"
            )));
        }
        Ok(())
    }

    /// Checks the values that need no model (all but whether the layer subset's layers exist),
    /// so that a command can refuse them before it loads one.
    pub fn validate_values(&self) -> Result<()> {
        let bad = |m: String| Err(ModelError::BadLora(m));
        if self.rank == 0 {
            return bad("rank must be at least 1 (got 0)".into());
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout must be in [0, 1) (got {})", self.dropout));
        }
        if !self.alpha.is_finite() || self.alpha <= 0.0 {
            return bad(format!("alpha must be positive (got {})", self.alpha));
        }
        if self.targets.is_empty() {
            return bad("no target modules".into());
        }
        if self.layers.as_ref().is_some_and(|l| l.is_empty()) {
            return bad("the layer subset is empty".into());
        }
        Ok(())
    }

    /// Whether layer `i` is adapted.
    pub fn adapts_layer(&self, i: usize) -> bool {
        self.layers.as_ref().is_none_or(|l| l.contains(&i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_follows_peft() {
        let c = LoraConfig::new(16);
        assert_eq!(c.alpha, 64.0);
        assert_eq!(c.scaling(), 4.0);
        assert_eq!(c.clone().with_rslora(true).scaling(), 16.0);
    }

    #[test]
    fn bad_configs_are_named() {
        let e = LoraConfig::new(0).validate(2).unwrap_err().to_string();
        assert!(e.contains("rank"), "{e}");
        let e = LoraConfig::new(4)
            .with_layers(Some(vec![5]))
            .validate(2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("layer 5"), "{e}");
    }

    #[test]
    fn settings_default_to_the_paper_and_deserialize_partially() {
        let s: LoraSettings = serde_json::from_str(r#"{"dropout": 0.1}"#).unwrap();
        assert_eq!(s.dropout, 0.1);
        assert_eq!(s.alpha_per_rank, 4.0);
        assert_eq!(s.targets.len(), 7);
        let c = s.at_rank(8, 3);
        assert_eq!((c.alpha, c.dropout, c.init_seed), (32.0, 0.1, 3));
        assert_eq!(LoraConfig::new(8), LoraSettings::default().at_rank(8, 0));
    }
}
