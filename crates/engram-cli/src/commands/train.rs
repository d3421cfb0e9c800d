//! `engram train`: LoRA adapters that memorize a fact file, written in PEFT's layout.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use engram_experiments::TrainingPreset;
use engram_facts::read_facts;
use engram_lora::{AnswerConfig, TrainConfig, Trainer, answer_questions, exact_match};

use crate::loaded::ModelArgs;

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
    /// LoRA rank.
    #[arg(long, default_value_t = 64)]
    pub rank: usize,
    /// lora_alpha (default 4 × rank).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Dropout on the adapter input.
    #[arg(long, default_value_t = 0.05)]
    pub dropout: f64,
    /// rsLoRA scaling (alpha / √r).
    #[arg(long)]
    pub rslora: bool,
    /// Adapted modules (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
    )]
    pub targets: Vec<String>,
    /// Adapt only these layers (comma-separated indices; default all).
    #[arg(long, value_delimiter = ',')]
    pub layers: Option<Vec<usize>>,
    /// Epochs.
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    /// Peak learning rate.
    #[arg(long, default_value_t = 1e-4)]
    pub lr: f64,
    /// Examples per micro-batch.
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// Micro-batches per optimizer step.
    #[arg(long, default_value_t = 1)]
    pub grad_accum: usize,
    /// Linear warm-up, in epochs.
    #[arg(long, default_value_t = 1.0)]
    pub warmup_epochs: f64,
    /// Hold the learning rate after warm-up instead of decaying it linearly to 0.
    #[arg(long)]
    pub constant_lr: bool,
    /// AdamW weight decay.
    #[arg(long, default_value_t = 0.0)]
    pub weight_decay: f64,
    /// Clip the global gradient norm.
    #[arg(long)]
    pub max_grad_norm: Option<f64>,
    /// Seed (adapter init, batch order, dropout).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Longest training example (default: the model's context window).
    #[arg(long)]
    pub max_len: Option<usize>,
    /// Continue from the newest checkpoint in --out.
    #[arg(long)]
    pub resume: bool,
    /// Checkpoints kept.
    #[arg(long, default_value_t = 1)]
    pub keep_checkpoints: usize,
    /// No per-epoch checkpoints.
    #[arg(long)]
    pub no_checkpoints: bool,
    /// After training, answer the original and rephrased questions and print exact match.
    #[arg(long)]
    pub eval: bool,
    /// Most new tokens per answer (with --eval).
    #[arg(long, default_value_t = 32)]
    pub max_new_tokens: usize,
}

/// Runs `engram train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let facts = read_facts(&a.facts)?;
    let loaded = a.model.load_on(true)?;
    let preset = TrainingPreset {
        alpha_per_rank: 4.0,
        dropout: a.dropout,
        rslora: a.rslora,
        targets: a.targets.clone(),
        layers: a.layers.clone(),
        epochs: a.epochs,
        lr: a.lr,
        batch_size: a.batch_size,
        grad_accum: a.grad_accum,
        warmup_epochs: a.warmup_epochs,
        decay: !a.constant_lr,
        weight_decay: a.weight_decay,
        max_grad_norm: a.max_grad_norm,
        seed: a.seed,
        max_len: a.max_len,
        keep_adapters: true,
    };
    let mut lora = preset.lora_config(a.rank)?;
    if let Some(alpha) = a.alpha {
        lora = lora.with_alpha(alpha);
    }
    let train = TrainConfig {
        checkpoints: !a.no_checkpoints,
        keep_checkpoints: a.keep_checkpoints,
        ..preset.train_config()
    };
    let trainer = Trainer {
        tokenizer: &loaded.tokenizer,
        lora,
        train,
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
    let done = trainer
        .run(loaded.model, &facts, &a.out, a.resume)
        .with_context(|| format!("training into {}", a.out.display()))?;
    let last = done.record.epochs.last();
    eprintln!(
        "wrote {} (final loss {:.4})",
        done.adapter_dir.display(),
        last.map_or(f64::NAN, |e| e.loss)
    );
    if a.eval {
        let cfg = AnswerConfig {
            batch_size: a.batch_size.max(8),
            max_new_tokens: a.max_new_tokens,
            stop_ids: loaded.stop_ids.clone(),
        };
        for (label, pick) in [
            (
                "original",
                (|f: &engram_facts::Fact| f.question.clone()) as fn(&engram_facts::Fact) -> String,
            ),
            ("rephrased (trained)", |f: &engram_facts::Fact| {
                f.rephrased_question.clone()
            }),
        ] {
            let qs: Vec<String> = facts.iter().map(pick).collect();
            let bar = indicatif::ProgressBar::new(qs.len() as u64);
            let answers = answer_questions(&done.model, &loaded.tokenizer, &qs, &cfg, Some(&bar))?;
            bar.finish_and_clear();
            let hits = answers
                .iter()
                .zip(&facts)
                .filter(|(ans, f)| exact_match(&ans.text, &f.answer))
                .count();
            println!(
                "exact match on {label} questions: {hits}/{} = {:.3}",
                facts.len(),
                hits as f64 / facts.len() as f64
            );
        }
    }
    Ok(())
}
