//! The LoRA trainer (TOFU / EnronQA conventions): AdamW (β 0.9/0.999, eps 1e-8, weight decay 0)
//! on the adapters only, linear warm-up (one epoch by default) and linear decay, gradient
//! accumulation, optional global grad-norm clipping (as `torch.nn.utils.clip_grad_norm_`),
//! length-bucketed shuffled batches, per-epoch checkpoints and exact resume, a progress bar.
//! Dropout masks come from the backend RNG re-seeded from (seed, step) before every micro-batch,
//! so runs with the same seed — and resumed runs — see the same masks.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::optim::{AdamWConfig, GradientsAccumulator, GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;
use engram_facts::Fact;
use engram_model::{Llama, LoraConfig};
use engram_tokenizer::ChatTokenizer;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::atomic;
use crate::batches::epoch_batches;
use crate::checkpoint::{self, TrainerState};
use crate::error::{LoraError, Result};
use crate::examples::{TrainExample, build_examples};
use crate::loss::{Batch, batch_loss};
use crate::peft::PeftAdapter;
use crate::schedule::LinearSchedule;

/// Training settings (defaults: EnronQA §6 — 10 epochs, lr 1e-4, batch 8).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
    /// Clip the global gradient norm to this value.
    pub max_grad_norm: Option<f64>,
    /// Seed of batch order and dropout (the adapter init seed is in the LoRA config).
    pub seed: u64,
    /// Longest example allowed (default: the model's context window).
    pub max_len: Option<usize>,
    /// Write a checkpoint after every epoch.
    pub checkpoints: bool,
    /// Checkpoints kept (the newest).
    pub keep_checkpoints: usize,
    /// Show a progress bar.
    #[serde(skip)]
    pub progress: bool,
    /// Draw the progress bar inside this group (e.g. under a sweep's overall bar).
    #[serde(skip)]
    pub progress_group: ProgressGroup,
}

/// Where progress bars are drawn: a group (e.g. under a sweep's overall bar) or, by default,
/// stderr. A display handle, not a setting: every group compares equal.
#[derive(Debug, Clone, Default)]
pub struct ProgressGroup(pub Option<indicatif::MultiProgress>);

impl PartialEq for ProgressGroup {
    fn eq(&self, _: &Self) -> bool {
        true
    }
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
            max_grad_norm: None,
            seed: 0,
            max_len: None,
            checkpoints: true,
            keep_checkpoints: 1,
            progress: true,
            progress_group: ProgressGroup::default(),
        }
    }
}

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
}

/// The record of a run, written to `OUT/train_record.json` (also when it diverges).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrainRecord {
    /// `finished` or `diverged`.
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
}

/// The trained model (adapters attached) and the record of the run.
pub struct TrainOutcome {
    /// The model with its trained adapters, on the training device.
    pub model: Llama,
    /// What happened.
    pub record: TrainRecord,
    /// Where the final adapter was written.
    pub adapter_dir: PathBuf,
    /// The optimizer (its state covers the adapters only).
    pub optimizer: ModuleOptimizer,
}

/// Trains adapters on facts.
pub struct Trainer<'a> {
    /// The model's tokenizer.
    pub tokenizer: &'a ChatTokenizer,
    /// Adapter hyper-parameters.
    pub lora: LoraConfig,
    /// Training settings.
    pub train: TrainConfig,
    /// Name of the base model, written to `adapter_config.json`.
    pub base_model: String,
}

/// Mixes seed, step and micro-batch into one RNG seed.
fn step_seed(seed: u64, step: usize, micro: usize) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update((step as u64).to_le_bytes());
    h.update((micro as u64).to_le_bytes());
    u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

/// The optimizer of every run: AdamW as `torch.optim.AdamW`.
fn optimizer(cfg: &TrainConfig) -> ModuleOptimizer {
    AdamWConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.999)
        .with_epsilon(1e-8)
        .with_weight_decay(cfg.weight_decay as f32)
        .init()
}

impl Trainer<'_> {
    fn validate(&self, model: &Llama) -> Result<()> {
        let t = &self.train;
        let bad = |m: &str| Err(LoraError::BadSetting(m.to_string()));
        if t.epochs == 0 {
            return bad("epochs must be at least 1");
        }
        if t.batch_size == 0 {
            return bad("batch size must be at least 1");
        }
        if t.grad_accum == 0 {
            return bad("gradient accumulation must be at least 1");
        }
        if !(t.lr.is_finite() && t.lr > 0.0) {
            return bad("learning rate must be positive");
        }
        if !t.warmup_epochs.is_finite() || t.warmup_epochs < 0.0 {
            return bad("warm-up epochs must be ≥ 0");
        }
        if t.max_grad_norm.is_some_and(|n| n.is_nan() || n <= 0.0) {
            return bad("max grad norm must be positive");
        }
        if !model.device().is_autodiff() {
            return bad("training needs an autodiff device (Device::autodiff())");
        }
        self.lora.validate(model.layers.len())?;
        Ok(())
    }

    fn fingerprint(&self, examples: &[TrainExample]) -> String {
        let mut t = self.train.clone();
        t.checkpoints = true;
        t.keep_checkpoints = 0;
        let mut h = Sha256::new();
        h.update(format!("{:?}", self.lora).as_bytes());
        h.update(serde_json::to_vec(&t).expect("json"));
        h.update(self.base_model.as_bytes());
        for e in examples {
            h.update(e.id.as_bytes());
            for id in &e.ids {
                h.update(id.to_le_bytes());
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Trains adapters on `facts` (rephrased question → answer) and writes the final adapter
    /// to `out` (PEFT layout), `out/train_record.json`, and per-epoch checkpoints under
    /// `out/checkpoints/`. With `resume`, continues from the newest checkpoint of the same run.
    pub fn run(
        &self,
        model: Llama,
        facts: &[Fact],
        out: &Path,
        resume: bool,
    ) -> Result<TrainOutcome> {
        self.validate(&model)?;
        let window = self
            .train
            .max_len
            .unwrap_or(model.config.max_position_embeddings);
        let examples = build_examples(self.tokenizer, facts, window)?;
        let pad_id = self.tokenizer.pad_id().ok_or_else(|| {
            LoraError::BadSetting("the tokenizer has no pad, eot or eos token".into())
        })?;
        let fingerprint = self.fingerprint(&examples);
        std::fs::create_dir_all(out).map_err(LoraError::io(out))?;

        let t = &self.train;
        let lengths: Vec<usize> = examples.iter().map(|e| e.ids.len()).collect();
        let batches_per_epoch = examples.len().div_ceil(t.batch_size);
        let steps_per_epoch = batches_per_epoch.div_ceil(t.grad_accum);
        let schedule = LinearSchedule {
            base: t.lr,
            warmup: (t.warmup_epochs * steps_per_epoch as f64).round() as usize,
            total: t.epochs * steps_per_epoch,
            decay: t.decay,
        };

        let restored = if resume {
            checkpoint::latest(out)?
        } else {
            if checkpoint::latest(out)?.is_some() {
                return Err(LoraError::Resume {
                    path: checkpoint::checkpoints_dir(out),
                    problem: "this output directory already holds checkpoints of a run; pass --resume to continue it, or choose another --out".into(),
                });
            }
            None
        };
        let (mut model, mut optim, mut state, resumed_after) = match restored {
            Some(r) => {
                if r.state.fingerprint != fingerprint {
                    return Err(LoraError::Resume {
                        path: r.dir,
                        problem: "it was made with other settings, facts or base model".into(),
                    });
                }
                let model = r.adapter.apply(model)?;
                let optim = optimizer(t)
                    .from_bytes(burn::tensor::Bytes::from_bytes_vec(r.optimizer))
                    .map_err(|e| LoraError::Resume {
                        path: r.dir.clone(),
                        problem: format!("optimizer state: {e:?}"),
                    })?;
                let after = r.state.epoch;
                (model, optim, r.state, Some(after))
            }
            None => (
                model.with_lora(&self.lora)?,
                optimizer(t),
                TrainerState {
                    epoch: 0,
                    global_step: 0,
                    fingerprint: fingerprint.clone(),
                    epochs: Vec::new(),
                },
                None,
            ),
        };
        let mut record = TrainRecord {
            status: "running".into(),
            error: None,
            base_model: self.base_model.clone(),
            facts: facts.len(),
            rank: self.lora.rank,
            alpha: self.lora.alpha,
            trainable_params: model.lora_parameter_count(),
            total_params: model.parameter_count(),
            train: t.clone(),
            resumed_after_epoch: resumed_after,
            epochs: state.epochs.clone(),
        };
        let record_path = out.join("train_record.json");
        let write_record = |r: &TrainRecord| {
            atomic::write_file(&record_path, &serde_json::to_vec_pretty(r).expect("json"))
        };

        if t.progress {
            eprintln!("{}", model.trainable_parameters_line());
        }
        let bar = if t.progress {
            let b = ProgressBar::new(schedule.total as u64);
            let b = match &t.progress_group.0 {
                Some(group) => group.add(b),
                None => b,
            };
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} train [{bar:30}] step {pos}/{len} {msg} eta {eta}",
                )
                .expect("template")
                .progress_chars("=> "),
            );
            b.set_position(state.global_step as u64);
            b.reset_eta();
            b
        } else {
            ProgressBar::hidden()
        };
        let device = model.device();
        for epoch in state.epoch..t.epochs {
            let t0 = Instant::now();
            let batches = epoch_batches(&lengths, t.batch_size, t.seed, epoch);
            let (mut tokens, mut labels, mut loss_sum, mut steps, mut lr) = (0, 0, 0.0, 0, 0.0);
            for group in batches.chunks(t.grad_accum) {
                lr = schedule.at(state.global_step);
                let batches: Vec<Batch> = group
                    .iter()
                    .map(|idx| {
                        let ex: Vec<&TrainExample> = idx.iter().map(|&i| &examples[i]).collect();
                        Batch::new(&ex, pad_id)
                    })
                    .collect();
                let step_labels: usize = batches.iter().map(Batch::labels).sum();
                let mut step_loss = 0.0;
                let mut accum = GradientsAccumulator::<Llama>::new();
                let mut single = None;
                for (micro, batch) in batches.iter().enumerate() {
                    device.seed(step_seed(t.seed, state.global_step, micro));
                    let loss = batch_loss(&model, batch, step_labels as f64);
                    step_loss += loss.clone().into_scalar::<f32>() as f64;
                    let grads = GradientsParams::from_grads(loss.backward(), &model);
                    if batches.len() == 1 {
                        single = Some(grads);
                    } else {
                        accum.accumulate(&model, grads);
                    }
                    tokens += batch.tokens;
                }
                if !step_loss.is_finite() {
                    let err = LoraError::NonFiniteLoss {
                        epoch: epoch + 1,
                        step: state.global_step + 1,
                        loss: step_loss,
                        lr,
                    };
                    bar.abandon();
                    record.status = "diverged".into();
                    record.error = Some(err.to_string());
                    write_record(&record)?;
                    return Err(err);
                }
                let mut grads = single.unwrap_or_else(|| accum.grads());
                if let Some(max) = t.max_grad_norm {
                    clip_global_norm(&model, &mut grads, max);
                }
                model = optim.step(lr, model, grads);
                state.global_step += 1;
                steps += 1;
                labels += step_labels;
                loss_sum += step_loss * step_labels as f64;
                let secs = t0.elapsed().as_secs_f64();
                bar.set_message(format!(
                    "epoch {}/{} loss {:.4} {:.0} tok/s",
                    epoch + 1,
                    t.epochs,
                    step_loss,
                    tokens as f64 / secs.max(1e-9)
                ));
                bar.inc(1);
            }
            let seconds = t0.elapsed().as_secs_f64();
            let rec = EpochRecord {
                epoch: epoch + 1,
                loss: loss_sum / labels.max(1) as f64,
                steps,
                tokens,
                label_tokens: labels,
                seconds,
                tokens_per_s: tokens as f64 / seconds.max(1e-9),
                lr,
            };
            bar.println(format!(
                "epoch {:>3}  loss {:.4}  {} tokens  {:.1}s  {:.0} tok/s",
                rec.epoch, rec.loss, rec.tokens, rec.seconds, rec.tokens_per_s
            ));
            state.epoch = epoch + 1;
            state.epochs.push(rec);
            record.epochs = state.epochs.clone();
            if t.checkpoints {
                let adapter =
                    PeftAdapter::from_model(&model, &self.lora, Some(self.base_model.clone()));
                checkpoint::save(out, &adapter, &optim, &state, t.keep_checkpoints)?;
            }
            write_record(&record)?;
        }
        bar.finish_and_clear();
        PeftAdapter::from_model(&model, &self.lora, Some(self.base_model.clone())).save(out)?;
        record.status = "finished".into();
        write_record(&record)?;
        Ok(TrainOutcome {
            model,
            record,
            adapter_dir: out.to_path_buf(),
            optimizer: optim,
        })
    }
}

/// Scales the adapters' gradients so that their global L2 norm is at most `max` (as
/// `torch.nn.utils.clip_grad_norm_`: factor `max / (norm + 1e-6)`, capped at 1).
fn clip_global_norm(model: &Llama, grads: &mut GradientsParams, max: f64) {
    let ids: Vec<_> = model
        .adapters()
        .iter()
        .flat_map(|(_, _, a)| [a.lora_a.id, a.lora_b.id])
        .collect();
    let mut total: Option<Tensor<1>> = None;
    for &id in &ids {
        if let Some(g) = grads.get::<2>(id) {
            let s = g.square().sum();
            total = Some(match total {
                Some(t) => t + s,
                None => s,
            });
        }
    }
    let Some(total) = total else { return };
    let norm = (total.into_scalar::<f32>() as f64).sqrt();
    let factor = (max / (norm + 1e-6)).min(1.0);
    if factor >= 1.0 {
        return;
    }
    for id in ids {
        if let Some(g) = grads.remove::<2>(id) {
            grads.register(id, g.mul_scalar(factor));
        }
    }
}
