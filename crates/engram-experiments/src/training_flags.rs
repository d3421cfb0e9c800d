//! `engram train`'s settings: a training preset named by `--preset` (without one, engram's
//! defaults — EnronQA §6's, the same as `configs/training/enronqa-lora.toml`), then each flag
//! given over it, so that `engram train` and a sweep over the same preset train alike.

use std::path::Path;

use engram_lora::{AdapterCompute, BatchLayout};
use engram_model::LoraTarget;

use crate::error::{ExperimentError, Result};
use crate::presets::{TrainingPreset, preset_file};

/// The preset `--preset` names and the flags that override its keys (with the `clap`
/// feature, `engram train`'s flags).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TrainingFlags {
    /// Training preset: a name (configs/training/NAME.toml) or a .toml file (default: engram's
    /// defaults, EnronQA §6's = configs/training/enronqa-lora.toml). The flags below override it.
    #[cfg_attr(feature = "clap", arg(long))]
    pub preset: Option<String>,
    /// Dropout on the adapter input.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dropout: Option<f64>,
    /// rsLoRA scaling (alpha / √r).
    #[cfg_attr(feature = "clap", arg(long))]
    pub rslora: bool,
    /// Adapted modules (comma-separated; default: all seven linear layers).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub targets: Option<Vec<String>>,
    /// Adapt only these layers (comma-separated indices; default all).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub layers: Option<Vec<usize>>,
    /// Epochs.
    #[cfg_attr(feature = "clap", arg(long))]
    pub epochs: Option<usize>,
    /// Peak learning rate (default: the preset's for --rank: its lr_by_rank entry, else lr).
    #[cfg_attr(feature = "clap", arg(long))]
    pub lr: Option<f64>,
    /// Examples per micro-batch.
    #[cfg_attr(feature = "clap", arg(long))]
    pub batch_size: Option<usize>,
    /// Micro-batches per optimizer step.
    #[cfg_attr(feature = "clap", arg(long))]
    pub grad_accum: Option<usize>,
    /// Linear warm-up, in epochs.
    #[cfg_attr(feature = "clap", arg(long))]
    pub warmup_epochs: Option<f64>,
    /// Hold the learning rate after warm-up instead of decaying it linearly to 0.
    #[cfg_attr(feature = "clap", arg(long))]
    pub constant_lr: bool,
    /// AdamW weight decay.
    #[cfg_attr(feature = "clap", arg(long))]
    pub weight_decay: Option<f64>,
    /// Clip the global gradient norm (0: no clipping; default: the preset's, 1.0).
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_grad_norm: Option<f64>,
    /// Seed (adapter init, batch order, dropout).
    #[cfg_attr(feature = "clap", arg(long))]
    pub seed: Option<u64>,
    /// Longest training example (default: the model's context window).
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_len: Option<usize>,
    /// Checkpoints kept.
    #[cfg_attr(feature = "clap", arg(long))]
    pub keep_checkpoints: Option<usize>,
    /// No per-epoch checkpoints.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_checkpoints: bool,
    /// Read the step losses from the device every N optimizer steps (default: the preset's, 16);
    /// the progress line's loss lags by up to N steps, a divergence is caught at the next read.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub log_every: Option<usize>,
    /// Pack each micro-batch's examples end to end into fixed-length rows (`layout = "packed"`):
    /// the same loss and gradients as padded rows, fewer padding slots, a few batch shapes.
    #[cfg_attr(feature = "clap", arg(long))]
    pub pack: bool,
    /// Slots per packed row (implies --pack; default: the longest example rounded up to 64).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub pack_length: Option<usize>,
    /// The adapters' matmul dtype: f32 (default, exact) or bf16 (f32 master weights and
    /// optimizer state, as PEFT under bf16 autocast).
    #[cfg_attr(feature = "clap", arg(long, value_name = "f32|bf16"))]
    pub adapter_compute: Option<AdapterCompute>,
    /// Every N epochs and after the last, answer a fixed sample of the trained (rephrased)
    /// questions greedily and keep the exact match in the epoch's record (`train_record.json`):
    /// the memorization curve (`eval_every`; default: the preset's, off).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub eval_every: Option<usize>,
    /// Questions in that sample (`eval_sample`; default 32, all facts when there are fewer).
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub eval_sample: Option<usize>,
    /// Capture the optimizer step once as a graph and replay it (`graph = true`: a CUDA graph,
    /// or CubeCL's software graph on wgpu; every step padded to the run's longest example; the
    /// CPU runs the same step eagerly).
    #[cfg_attr(feature = "clap", arg(long))]
    pub graph: bool,
}

impl TrainingFlags {
    /// The preset `--preset` names (engram's defaults without one) with every flag given
    /// applied over it. `--preset SPEC` is a file when SPEC is one, else found as an
    /// experiment's preset is, from the working directory (`configs/training/SPEC.toml`).
    /// `--lr` is every rank's: it clears the preset's `lr_by_rank`.
    pub fn settings(&self) -> Result<TrainingPreset> {
        let mut p = match self.preset.as_deref() {
            None => TrainingPreset::default(),
            Some(spec) if Path::new(spec).is_file() => TrainingPreset::load(Path::new(spec))?,
            Some(spec) => TrainingPreset::load(&preset_file(
                Path::new("--preset"),
                Path::new(""),
                Path::new("configs"),
                "training",
                spec,
            )?)?,
        };
        let (l, t) = (&mut p.lora, &mut p.train);
        set(&mut l.dropout, self.dropout);
        l.rslora |= self.rslora;
        if let Some(names) = &self.targets {
            l.targets = LoraTarget::parse_list(names).map_err(|e| ExperimentError::Config {
                path: "--targets".into(),
                message: e.to_string(),
            })?;
        }
        if self.layers.is_some() {
            l.layers = self.layers.clone();
        }
        set(&mut t.epochs, self.epochs);
        if self.lr.is_some() {
            p.lr_by_rank.clear();
        }
        set(&mut t.lr, self.lr);
        set(&mut t.batch_size, self.batch_size);
        set(&mut t.grad_accum, self.grad_accum);
        set(&mut t.warmup_epochs, self.warmup_epochs);
        t.decay &= !self.constant_lr;
        set(&mut t.weight_decay, self.weight_decay);
        set_some(&mut t.max_grad_norm, self.max_grad_norm);
        set(&mut t.seed, self.seed);
        set_some(&mut t.max_len, self.max_len);
        set(&mut t.keep_checkpoints, self.keep_checkpoints);
        t.checkpoints &= !self.no_checkpoints;
        set(&mut t.log_every, self.log_every);
        if self.pack || self.pack_length.is_some() {
            t.layout = BatchLayout::Packed;
        }
        set_some(&mut t.pack_length, self.pack_length);
        set(&mut t.adapter_compute, self.adapter_compute);
        set(&mut t.eval_every, self.eval_every);
        set_some(&mut t.eval_sample, self.eval_sample);
        t.graph |= self.graph;
        Ok(p)
    }
}

/// `field = value` when a value was given.
fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *field = v;
    }
}

/// `field = Some(value)` when a value was given (a key whose absence means "none").
fn set_some<T>(field: &mut Option<T>, value: Option<T>) {
    if value.is_some() {
        *field = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flags_leave_the_defaults() {
        assert_eq!(
            TrainingFlags::default().settings().unwrap(),
            TrainingPreset::default()
        );
    }

    #[test]
    fn flags_override_the_preset_and_lr_clears_lr_by_rank() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, "epochs = 3\nlr = 1e-3\n[lr_by_rank]\n64 = 5e-4\n").unwrap();
        let mut flags = TrainingFlags {
            preset: Some(file.display().to_string()),
            batch_size: Some(2),
            pack_length: Some(128),
            targets: Some(vec!["q_proj".into(), "v_proj".into()]),
            ..Default::default()
        };
        let p = flags.settings().unwrap();
        assert_eq!((p.train.epochs, p.train.batch_size), (3, 2));
        assert_eq!(p.lr_at(64), 5e-4);
        assert_eq!(p.train.layout, BatchLayout::Packed);
        assert_eq!(p.train.pack_length, Some(128));
        assert_eq!(p.lora.targets, vec![LoraTarget::Q, LoraTarget::V]);
        flags.lr = Some(2e-3);
        let p = flags.settings().unwrap();
        assert_eq!((p.lr_at(64), p.lr_at(8)), (2e-3, 2e-3));
    }

    #[test]
    fn a_missing_preset_or_an_unknown_target_is_named() {
        let missing = TrainingFlags {
            preset: Some("no-such-preset".into()),
            ..Default::default()
        };
        let e = missing.settings().unwrap_err().to_string();
        assert!(
            e.contains("no-such-preset") && e.contains("configs/training/no-such-preset.toml"),
            "{e}"
        );
        let bad = TrainingFlags {
            targets: Some(vec!["qq_proj".into()]),
            ..Default::default()
        };
        let e = bad.settings().unwrap_err().to_string();
        assert!(e.contains("--targets") && e.contains("qq_proj"), "{e}");
    }
}
