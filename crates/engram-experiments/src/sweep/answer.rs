//! The steps of a cell's answers that depend on its method: the memory check before a LoRA
//! cell loads anything, training its adapters on the rephrased questions (resuming from the
//! cell's checkpoints), exporting them for llama.cpp, and the method's figures as the record
//! holds them. [`super::runner::Runner::answer_cell`] puts them in order and answers through
//! [`engram_baselines::answer_by`].

use std::path::Path;

use anyhow::{Context, Result};
use engram_baselines::Measured;
use engram_facts::Fact;
use engram_io::{Progress, Stop};
use engram_lora::{EpochEval, GgufAdapterType, TrainOutcome, Trainer, write_gguf_adapter};
use engram_model::{AnswerConfig, Session};

use crate::cells::{Cell, Method};
use crate::curve::SampleExactMatch;
use crate::estimate::{check_training_device, check_training_memory};
use crate::experiment::Experiment;
use crate::record::MethodMetrics;

/// Refuses a LoRA cell whose adapters' matmul dtype the device cannot compute in
/// ([`check_training_device`]), or whose estimated peak memory (the `--dry-run` planner's)
/// exceeds what the device has ([`check_training_memory`]; skipped where the architecture is
/// unknown), before anything is loaded onto it.
pub fn check_memory(exp: &Experiment, cell: &Cell, facts: &[Fact]) -> Result<()> {
    if matches!(cell.method, Method::Lora { .. }) {
        check_training_device(&cell.id(), &exp.backend, &exp.training)?;
    }
    let (Method::Lora { rank }, Some((cfg, _))) = (cell.method, crate::dry_run::architecture(exp))
    else {
        return Ok(());
    };
    check_training_memory(
        &cell.id(),
        &cfg,
        &exp.model.dtype,
        &exp.backend,
        &exp.training,
        rank,
        facts,
    )
}

/// Trains the adapters of LoRA cell `cell` (at its rank) on `session`'s model into `work`
/// (with its replicate's seed).
pub fn train(
    exp: &Experiment,
    session: &Session,
    cell: &Cell,
    facts: &[Fact],
    work: &Path,
    progress: &dyn Progress,
    stop: &Stop,
) -> Result<TrainOutcome> {
    let Method::Lora { rank } = cell.method else {
        anyhow::bail!("{}: only LoRA cells train", cell.id());
    };
    let mut preset = exp.training.clone();
    preset.train.seed = crate::plan::replicate_seed(exp, cell);
    // The memorization curve (eval_every): greedy exact match on a fixed sample of the
    // trained questions, answered as the cell answers.
    let cfg = AnswerConfig {
        stop_ids: session.stop_ids.clone(),
        interrupt: stop.clone(),
        ..exp.answer.clone()
    };
    let curve = SampleExactMatch::for_training(&preset.train, &session.tokenizer, facts, cfg);
    let trainer = Trainer {
        tokenizer: &session.tokenizer,
        lora: preset.lora_config(rank),
        train: preset.train_config(rank),
        base_model: exp.model_source(),
    };
    trainer
        .run_evaluated(
            session.model.clone(),
            facts,
            work,
            true,
            progress.subtask().as_ref(),
            stop,
            curve.as_ref().map(|c| c as &dyn EpochEval),
        )
        .with_context(|| format!("training into {}", work.display()))
}

/// Writes the adapter just trained into `work` as llama.cpp's LoRA adapter GGUF,
/// `<results>/adapters/<cell>.gguf` (`[export] gguf = true`), against the base `session` holds.
pub fn export_gguf(
    exp: &Experiment,
    session: &Session,
    results: &Path,
    cell: &Cell,
    work: &Path,
    progress: &dyn Progress,
) -> Result<()> {
    let adapter = engram_lora::load_adapter(work)?;
    let dir = results.join("adapters");
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let out = dir.join(format!("{}.gguf", cell.id()));
    let ty = match exp.export.gguf_dtype.as_deref() {
        Some("f32") => GgufAdapterType::F32,
        _ => GgufAdapterType::F16,
    };
    // The session the cell trained with holds the base's config: no second open.
    write_gguf_adapter(&adapter, &session.config, &session.origin, &out, ty, true)?;
    progress.note(&format!(
        "{}: adapter exported for llama.cpp to {}",
        cell.id(),
        out.display()
    ));
    Ok(())
}

/// A LoRA cell's figures: its training's losses, epochs and memorization curve.
pub fn lora_metrics(t: &TrainOutcome) -> MethodMetrics {
    MethodMetrics::Lora {
        final_loss: t.record.epochs.last().map(|e| e.loss),
        epochs: t.record.epochs.len(),
        trainable_params: t.record.trainable_params,
        resumed_after_epoch: t.record.resumed_after_epoch,
        epoch_losses: t.record.epochs.iter().map(|e| e.loss).collect(),
        curve: t
            .record
            .epochs
            .iter()
            .filter_map(|e| e.exact_match.map(|m| (e.epoch, m)))
            .collect(),
    }
}

/// A baseline's figures as its record holds them.
pub fn method_metrics(m: &Measured) -> MethodMetrics {
    match m {
        Measured::LongContext {
            prefix_tokens,
            prefill_tokens,
            ..
        } => MethodMetrics::LongContext {
            prefix_tokens: *prefix_tokens,
            prefill_tokens: *prefill_tokens,
        },
        Measured::NotApplicable { needed, window } => MethodMetrics::NotApplicable {
            needed_tokens: *needed,
            window: *window,
        },
        Measured::Rag { retrieval } => MethodMetrics::Rag {
            retrieval: retrieval.clone(),
        },
        Measured::Nothing => unreachable!("only LoRA cells answer from the weights"),
    }
}
