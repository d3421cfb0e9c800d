//! `engram train`: LoRA adapters that memorize a fact file, written in PEFT's layout. Settings
//! come from a training preset (`--preset`; without one, engram's defaults — EnronQA §6's, the
//! same as `configs/training/enronqa-lora.toml`), then from the flags given, so `engram train`
//! and a sweep over the same preset train alike.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use engram_experiments::TrainingPreset;
use engram_experiments::{SampleExactMatch, exact_match_hits};
use engram_facts::{Fact, read_facts};
use engram_lora::{AdapterCompute, BatchLayout, EpochEval, LoraError, Trainer};
use engram_model::{AnswerConfig, LoraTarget};

use crate::loaded::ModelArgs;
use crate::progress::Bars;
use crate::signals::{self, ExitStatus};

/// Arguments of `engram train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Facts (JSONL: id, question, rephrased_question, answer); trained on the rephrased
    /// questions.
    #[arg(long)]
    pub facts: PathBuf,
    /// Output directory: the adapter (adapter_model.safetensors + adapter_config.json),
    /// train_record.json and checkpoints/.
    #[arg(long)]
    pub out: PathBuf,
    /// Training preset: a name (configs/training/NAME.toml) or a .toml file (default: engram's
    /// defaults, EnronQA §6's = configs/training/enronqa-lora.toml). The flags below override it.
    #[arg(long)]
    pub preset: Option<String>,
    /// LoRA rank.
    #[arg(long, default_value_t = 64)]
    pub rank: usize,
    /// lora_alpha (default: the preset's alpha_per_rank × rank, 4 × rank).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Dropout on the adapter input.
    #[arg(long)]
    pub dropout: Option<f64>,
    /// rsLoRA scaling (alpha / √r).
    #[arg(long)]
    pub rslora: bool,
    /// Adapted modules (comma-separated; default: all seven linear layers).
    #[arg(long, value_delimiter = ',')]
    pub targets: Option<Vec<String>>,
    /// Adapt only these layers (comma-separated indices; default all).
    #[arg(long, value_delimiter = ',')]
    pub layers: Option<Vec<usize>>,
    /// Epochs.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Peak learning rate (default: the preset's for --rank: its lr_by_rank entry, else lr).
    #[arg(long)]
    pub lr: Option<f64>,
    /// Examples per micro-batch.
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Micro-batches per optimizer step.
    #[arg(long)]
    pub grad_accum: Option<usize>,
    /// Linear warm-up, in epochs.
    #[arg(long)]
    pub warmup_epochs: Option<f64>,
    /// Hold the learning rate after warm-up instead of decaying it linearly to 0.
    #[arg(long)]
    pub constant_lr: bool,
    /// AdamW weight decay.
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Clip the global gradient norm (0: no clipping; default: the preset's, 1.0).
    #[arg(long)]
    pub max_grad_norm: Option<f64>,
    /// Seed (adapter init, batch order, dropout).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Longest training example (default: the model's context window).
    #[arg(long)]
    pub max_len: Option<usize>,
    /// Continue from the newest checkpoint in --out.
    #[arg(long)]
    pub resume: bool,
    /// Checkpoints kept.
    #[arg(long)]
    pub keep_checkpoints: Option<usize>,
    /// No per-epoch checkpoints.
    #[arg(long)]
    pub no_checkpoints: bool,
    /// Read the step losses from the device every N optimizer steps (default: the preset's, 16);
    /// the progress line's loss lags by up to N steps, a divergence is caught at the next read.
    #[arg(long, value_name = "N")]
    pub log_every: Option<usize>,
    /// Pack each micro-batch's examples end to end into fixed-length rows (`layout = "packed"`):
    /// the same loss and gradients as padded rows, fewer padding slots, a few batch shapes.
    #[arg(long)]
    pub pack: bool,
    /// Slots per packed row (implies --pack; default: the longest example rounded up to 64).
    #[arg(long, value_name = "N")]
    pub pack_length: Option<usize>,
    /// The adapters' matmul dtype: f32 (default, exact) or bf16 (f32 master weights and
    /// optimizer state, as PEFT under bf16 autocast).
    #[arg(long, value_name = "f32|bf16")]
    pub adapter_compute: Option<AdapterCompute>,
    /// After training, answer the original and rephrased questions and print exact match.
    #[arg(long)]
    pub eval: bool,
    /// Every N epochs and after the last, answer a fixed sample of the trained (rephrased)
    /// questions greedily and keep the exact match in the epoch's record (`train_record.json`):
    /// the memorization curve (`eval_every`; default: the preset's, off).
    #[arg(long, value_name = "N")]
    pub eval_every: Option<usize>,
    /// Questions in that sample (`eval_sample`; default 32, all facts when there are fewer).
    #[arg(long, value_name = "N")]
    pub eval_sample: Option<usize>,
    /// Most new tokens per answer (with --eval).
    #[arg(long, default_value_t = AnswerConfig::default().max_new_tokens)]
    pub max_new_tokens: usize,
}

/// The preset `--preset` names: a `.toml` path, or `configs/training/NAME.toml`.
fn preset(spec: Option<&str>) -> Result<TrainingPreset> {
    let Some(spec) = spec else {
        return Ok(TrainingPreset::default());
    };
    let path = if spec.ends_with(".toml") || Path::new(spec).is_file() {
        PathBuf::from(spec)
    } else {
        Path::new("configs/training").join(format!("{spec}.toml"))
    };
    if !path.is_file() {
        bail!(
            "--preset {spec}: no such preset (looked for {})",
            path.display()
        );
    }
    Ok(TrainingPreset::load(&path)?)
}

impl TrainArgs {
    /// The preset with the flags given applied over it.
    fn settings(&self) -> Result<TrainingPreset> {
        let mut p = preset(self.preset.as_deref())?;
        let (l, t) = (&mut p.lora, &mut p.train);
        set(&mut l.dropout, self.dropout);
        l.rslora |= self.rslora;
        if let Some(names) = &self.targets {
            l.targets = LoraTarget::parse_list(names)?;
        }
        if self.layers.is_some() {
            l.layers = self.layers.clone();
        }
        set(&mut t.epochs, self.epochs);
        if self.lr.is_some() {
            // --lr is every rank's, the preset's lr_by_rank included.
            p.lr_by_rank.clear();
        }
        set(&mut t.lr, self.lr);
        set(&mut t.batch_size, self.batch_size);
        set(&mut t.grad_accum, self.grad_accum);
        set(&mut t.warmup_epochs, self.warmup_epochs);
        t.decay &= !self.constant_lr;
        set(&mut t.weight_decay, self.weight_decay);
        if self.max_grad_norm.is_some() {
            t.max_grad_norm = self.max_grad_norm;
        }
        set(&mut t.seed, self.seed);
        if self.max_len.is_some() {
            t.max_len = self.max_len;
        }
        set(&mut t.keep_checkpoints, self.keep_checkpoints);
        t.checkpoints &= !self.no_checkpoints;
        set(&mut t.log_every, self.log_every);
        if self.pack || self.pack_length.is_some() {
            t.layout = BatchLayout::Packed;
        }
        if self.pack_length.is_some() {
            t.pack_length = self.pack_length;
        }
        set(&mut t.adapter_compute, self.adapter_compute);
        set(&mut t.eval_every, self.eval_every);
        if self.eval_sample.is_some() {
            t.eval_sample = self.eval_sample;
        }
        Ok(p)
    }
}

/// Which question of a fact `--eval` asks.
type Pick = fn(&Fact) -> &str;

fn set<T: Copy>(field: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *field = v;
    }
}

/// Runs `engram train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let facts = read_facts(&a.facts)?;
    let settings = a.settings()?;
    let session = a.model.load_on(true)?;
    let mut lora = settings.lora_config(a.rank);
    if let Some(alpha) = a.alpha {
        lora = lora.with_alpha(alpha);
    }
    let trainer = Trainer {
        tokenizer: &session.tokenizer,
        lora,
        train: settings.train_config(a.rank),
        base_model: a.model.model.clone(),
    };
    eprintln!(
        "{} facts from {}; rank {} alpha {} on {}",
        facts.len(),
        a.facts.display(),
        a.rank,
        trainer.lora.alpha,
        a.model.backend
    );
    let stop = signals::install()?;
    let cfg = AnswerConfig {
        batch_size: settings.train.batch_size.max(8),
        max_new_tokens: a.max_new_tokens,
        stop_ids: session.stop_ids.clone(),
        interrupt: stop.clone(),
        ..Default::default()
    };
    let curve = SampleExactMatch::for_training(&settings.train, &session.tokenizer, &facts, cfg);
    let done = match trainer.run_evaluated(
        session.model,
        &facts,
        &a.out,
        a.resume,
        &Bars::new(true),
        &stop,
        curve.as_ref().map(|c| c as &dyn EpochEval),
    ) {
        Err(e @ LoraError::Stopped { signal, .. }) => {
            eprintln!(
                "{e}: run the same command with --resume to go on ({})",
                a.out.display()
            );
            return Err(ExitStatus(signals::exit_status(signal)).into());
        }
        r => r.with_context(|| format!("training into {}", a.out.display()))?,
    };
    let last = done.record.epochs.last();
    eprintln!(
        "wrote {} (final loss {:.4})",
        done.adapter_dir.display(),
        last.map_or(f64::NAN, |e| e.loss)
    );
    if a.eval {
        let cfg = AnswerConfig {
            batch_size: settings.train.batch_size.max(8),
            max_new_tokens: a.max_new_tokens,
            stop_ids: session.stop_ids.clone(),
            ..Default::default()
        };
        let bars = Bars::new(true);
        let which: [(&str, Pick); 2] = [
            ("original", |f| &f.question),
            ("rephrased (trained)", |f| &f.rephrased_question),
        ];
        let golds: Vec<String> = facts.iter().map(|f| f.answer.clone()).collect();
        for (label, pick) in which {
            let qs: Vec<String> = facts.iter().map(|f| pick(f).to_string()).collect();
            let hits = exact_match_hits(
                &done.model,
                &session.tokenizer,
                &qs,
                &golds,
                &cfg,
                Some(&bars),
            )?;
            println!(
                "exact match on {label} questions: {hits}/{} = {:.3}",
                facts.len(),
                hits as f64 / facts.len() as f64
            );
        }
    }
    Ok(())
}
