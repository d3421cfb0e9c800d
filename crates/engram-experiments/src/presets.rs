//! Presets: the model, training and judge settings that experiments name (`configs/models/`,
//! `configs/training/`, `configs/judges/`). Every table rejects keys it does not know.
//!
//! A training preset is the adapter settings ([`LoraSettings`]) and the trainer settings
//! ([`TrainConfig`]) side by side, plus what a sweep does with the adapters afterwards; the
//! defaults of both live in those types, not here. The judge preset lives with the judges
//! ([`JudgePreset`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use engram_lora::TrainConfig;
use engram_model::{LoraConfig, LoraSettings};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

pub use engram_judge::JudgePreset;

use crate::error::{ExperimentError, Result};

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

/// A training preset (`configs/training/NAME.toml`): the LoRA keys of [`LoraSettings`] and the
/// trainer keys of [`TrainConfig`] in one table (its `seed` also seeds the adapters'
/// initialization), and `keep_adapters`. Keys left out take those types' defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingPreset {
    /// Adapter settings (`alpha_per_rank`, `dropout`, `rslora`, `targets`, `layers`).
    #[serde(flatten)]
    pub lora: LoraSettings,
    /// Trainer settings (`epochs`, `lr`, `batch_size`, …, `max_grad_norm`, `seed`).
    #[serde(flatten)]
    pub train: TrainConfig,
    /// Peak learning rates of particular ranks (`[lr_by_rank]`, e.g. `64 = 5e-4`): a rank listed
    /// here trains at its own rate, every other rank at `lr`. For rank sweeps where the large
    /// ranks need a smaller step than the small ones (EnronQA §6 trains every rank at one lr).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "rank_lrs"
    )]
    pub lr_by_rank: BTreeMap<usize, f64>,
    /// Keep each LoRA cell's adapter under `work/` after the cell is done (its optimizer
    /// checkpoints are always removed then).
    #[serde(default = "yes")]
    pub keep_adapters: bool,
}

fn yes() -> bool {
    true
}

impl Default for TrainingPreset {
    /// The defaults of [`LoraSettings`] and [`TrainConfig`] (EnronQA §6); adapters kept.
    fn default() -> Self {
        Self {
            lora: LoraSettings::default(),
            train: TrainConfig::default(),
            lr_by_rank: BTreeMap::new(),
            keep_adapters: true,
        }
    }
}

impl TrainingPreset {
    /// Reads a preset file, naming it (and the key) in any error.
    pub fn load(path: &Path) -> Result<Self> {
        parse_file(path)
    }

    /// The adapter settings at `rank` (alpha = `alpha_per_rank` × rank; the preset's seed also
    /// seeds the adapter's initialization).
    pub fn lora_config(&self, rank: usize) -> LoraConfig {
        self.lora.at_rank(rank, self.train.seed)
    }

    /// The peak learning rate of a rank: its `lr_by_rank` entry, else `lr`.
    pub fn lr_at(&self, rank: usize) -> f64 {
        self.lr_by_rank.get(&rank).copied().unwrap_or(self.train.lr)
    }

    /// The trainer settings at `rank` (`lr` is [`Self::lr_at`]).
    pub fn train_config(&self, rank: usize) -> TrainConfig {
        TrainConfig {
            lr: self.lr_at(rank),
            ..self.train.clone()
        }
    }

    /// The settings that decide the outcome of a LoRA cell of `rank`, in a fixed key order (a
    /// cell's config hash covers them): everything but how checkpoints and adapters are kept
    /// and how often losses are read, with `lr` the rank's own ([`Self::lr_at`]), so that an
    /// `lr_by_rank` entry changes the hash of that rank's cells only.
    pub fn outcome_settings(&self, rank: usize) -> Value {
        let mut v = serde_json::to_value(self).expect("training preset serializes");
        v["lr"] = json!(self.lr_at(rank));
        let o = v.as_object_mut().expect("object");
        for k in [
            "checkpoints",
            "keep_checkpoints",
            "log_every",
            "lr_by_rank",
            "keep_adapters",
        ] {
            o.shift_remove(k);
        }
        v
    }
}

/// `[lr_by_rank]`: TOML keys are strings, so each must read as a rank (an integer ≥ 1) and
/// each value as a learning rate (finite, > 0); a bad one is named.
fn rank_lrs<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<BTreeMap<usize, f64>, D::Error> {
    use serde::de::Error;
    let raw = BTreeMap::<String, f64>::deserialize(d)?;
    raw.into_iter()
        .map(|(key, lr)| {
            let rank = key
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&r| r > 0)
                .ok_or_else(|| {
                    D::Error::custom(format!(
                        "lr_by_rank: `{key}` is not a rank (an integer ≥ 1, e.g. 64 = 5e-4)"
                    ))
                })?;
            if !(lr.is_finite() && lr > 0.0) {
                return Err(D::Error::custom(format!(
                    "lr_by_rank: rank {rank} has learning rate {lr}; it must be finite and > 0"
                )));
            }
            Ok((rank, lr))
        })
        .collect()
}

/// Parses `text` (the contents of `path`) as `T`, naming the file in any error.
pub(crate) fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| ExperimentError::Config {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })
}

/// The file of preset `name` of `kind` (`models`, `training`, `judges`, `qa`): `name` itself,
/// from `base`, when it ends in `.toml`, else `<configs>/<kind>/<name>.toml`. A missing file is
/// an error naming it and `named_by` (the experiment file, or the flag).
pub(crate) fn preset_file(
    named_by: &Path,
    base: &Path,
    configs: &Path,
    kind: &'static str,
    name: &str,
) -> Result<PathBuf> {
    let file = if name.ends_with(".toml") {
        base.join(name)
    } else {
        configs.join(kind).join(format!("{name}.toml"))
    };
    if !file.is_file() {
        return Err(ExperimentError::MissingPreset {
            experiment: named_by.to_path_buf(),
            kind,
            name: name.to_string(),
            looked: file.display().to_string(),
        });
    }
    Ok(file)
}

/// Reads `path`, naming it in any error.
pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(ExperimentError::io(path))
}

/// Reads and parses a preset file.
pub fn parse_file<T: DeserializeOwned>(path: &Path) -> Result<T> {
    parse(path, &read(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_training_preset_is_the_default_setup() {
        let path = Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
        )
        .join("../../configs/training/enronqa-lora.toml");
        assert_eq!(
            TrainingPreset::load(&path).unwrap(),
            TrainingPreset::default()
        );
    }

    #[test]
    fn every_shipped_judge_preset_parses_and_its_prompt_loads() {
        let dir = engram_testkit::repo().join("configs/judges");
        let mut formats = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let preset: JudgePreset = parse_file(&path).unwrap();
                if let JudgePreset::Openai { verdict_format, .. } = &preset {
                    let prompt = preset.prompt_path(&dir).unwrap();
                    engram_judge::JudgePrompt::load(&prompt).unwrap();
                    formats.push(*verdict_format);
                }
            }
        }
        // The paper's judge asks for JSON where the server allows it, the small one in text.
        formats.sort_by_key(|f| f.to_string());
        assert_eq!(
            formats,
            [
                engram_judge::VerdictFormat::Auto,
                engram_judge::VerdictFormat::Text
            ]
        );
    }

    #[test]
    fn a_partial_preset_takes_the_defaults_and_unknown_keys_are_named() {
        let p = Path::new("t.toml");
        let t: TrainingPreset = parse(p, "epochs = 3\ndropout = 0.1\nseed = 7\n").unwrap();
        assert_eq!(t.train.epochs, 3);
        assert_eq!(t.train.lr, 1e-4);
        assert_eq!(t.train.max_grad_norm, Some(1.0));
        assert_eq!(t.lora.dropout, 0.1);
        assert_eq!(t.lora_config(8).alpha, 32.0);
        assert_eq!(t.lora_config(8).init_seed, 7);
        let e = parse::<TrainingPreset>(p, "epochs = 3\nlearnig_rate = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.toml") && e.contains("learnig_rate"), "{e}");
        let e = parse::<TrainingPreset>(p, "targets = [\"lm_head\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.toml") && e.contains("lm_head"), "{e}");
    }

    #[test]
    fn outcome_settings_keep_the_order_records_were_hashed_with() {
        let keys: Vec<String> = TrainingPreset::default()
            .outcome_settings(8)
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            keys,
            [
                "alpha_per_rank",
                "dropout",
                "rslora",
                "targets",
                "layers",
                "epochs",
                "lr",
                "batch_size",
                "grad_accum",
                "warmup_epochs",
                "decay",
                "weight_decay",
                "max_grad_norm",
                "seed",
                "max_len"
            ]
        );
    }

    #[test]
    fn a_rank_of_its_own_lr_trains_at_it_and_changes_only_its_own_settings() {
        let p = Path::new("t.toml");
        let t: TrainingPreset = parse(p, "lr = 1e-3\n[lr_by_rank]\n64 = 5e-4\n").unwrap();
        assert_eq!(t.lr_at(8), 1e-3);
        assert_eq!(t.lr_at(64), 5e-4);
        assert_eq!(t.train_config(64).lr, 5e-4);
        assert_eq!(t.train_config(64).epochs, t.train.epochs);
        let plain: TrainingPreset = parse(p, "lr = 1e-3\n").unwrap();
        // Rank 8's settings (and so its cells' hashes) are those of the preset without the
        // table; rank 64's differ in lr alone.
        assert_eq!(t.outcome_settings(8), plain.outcome_settings(8));
        let (a, b) = (t.outcome_settings(64), plain.outcome_settings(64));
        assert_eq!(a["lr"], json!(5e-4));
        assert_eq!(b["lr"], json!(1e-3));
        let mut a = a;
        a["lr"] = b["lr"].clone();
        assert_eq!(a, b);
        // Inline in an experiment's [override.training] as well.
        let t: TrainingPreset = parse(p, "lr_by_rank = { 8 = 2e-3, 2048 = 1e-5 }\n").unwrap();
        assert_eq!((t.lr_at(8), t.lr_at(2048), t.lr_at(64)), (2e-3, 1e-5, 1e-4));
        for (text, named) in [
            ("[lr_by_rank]\nr64 = 5e-4\n", "`r64` is not a rank"),
            ("[lr_by_rank]\n0 = 5e-4\n", "`0` is not a rank"),
            ("[lr_by_rank]\n64 = -1.0\n", "rank 64 has learning rate -1"),
            ("[lr_by_rank]\n64 = \"fast\"\n", "fast"),
        ] {
            let e = parse::<TrainingPreset>(p, text).unwrap_err().to_string();
            assert!(e.contains("t.toml") && e.contains(named), "{text}: {e}");
        }
    }
}
