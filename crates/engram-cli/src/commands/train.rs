//! `engram train`: LoRA adapters that memorize a fact file, written in PEFT's layout. Settings
//! come from a training preset (`--preset`; without one, engram's defaults — EnronQA §6's, the
//! same as `configs/training/enronqa-lora.toml`), then from the flags given, so `engram train`
//! and a sweep over the same preset train alike.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use engram_experiments::{SampleExactMatch, exact_match_hits};
use engram_experiments::{
    TrainingFlags, check_training_device, check_training_memory, local_architecture,
};
use engram_facts::{Asked, read_facts};
use engram_lora::{EpochEval, LoraError, Trainer, check_settings};
use engram_model::AnswerConfig;

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
    /// LoRA rank.
    #[arg(long, default_value_t = 64)]
    pub rank: usize,
    /// lora_alpha (default: the preset's alpha_per_rank × rank, 4 × rank).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Continue from the newest checkpoint in --out.
    #[arg(long)]
    pub resume: bool,
    /// After training, answer the original and rephrased questions and print exact match.
    #[arg(long)]
    pub eval: bool,
    /// Most new tokens per answer (with --eval).
    #[arg(long, default_value_t = AnswerConfig::default().max_new_tokens)]
    pub max_new_tokens: usize,
    #[command(
        flatten,
        next_help_heading = "Training preset, and flags over its keys"
    )]
    pub training: TrainingFlags,
}

/// Runs `engram train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let facts = read_facts(&a.facts)?;
    let settings = a.training.settings()?;
    // The device's and the planner's refusals come before anything is loaded.
    check_training_device(
        &format!("rank {} on {}", a.rank, a.model.model),
        &a.model.backend,
        &settings,
    )?;
    if let Some((cfg, origin)) = local_architecture(&a.model.model) {
        let what = format!("rank {} on {origin}", a.rank);
        let (dtype, backend) = (&a.model.dtype, &a.model.backend);
        check_training_memory(&what, &cfg, dtype, backend, &settings, a.rank, &facts)?;
    }
    let mut lora = settings.lora_config(a.rank);
    if let Some(alpha) = a.alpha {
        lora = lora.with_alpha(alpha);
    }
    let train = settings.train_config(a.rank);
    // A bad rank, alpha or count is refused before the model is loaded (16 GB for an 8B).
    check_settings(&lora, &train).with_context(|| format!("training into {}", a.out.display()))?;
    let session = a.model.load_on(true)?;
    let trainer = Trainer {
        tokenizer: &session.tokenizer,
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
        let which = [
            ("original", Asked::Original),
            ("rephrased (trained)", Asked::Rephrased),
        ];
        let golds: Vec<String> = facts.iter().map(|f| f.answer.clone()).collect();
        for (label, asked) in which {
            let qs: Vec<String> = facts.iter().map(|f| f.asked(asked).to_string()).collect();
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
