//! A cell's answers by its method: LoRA trains adapters on the rephrased questions (resuming
//! from the cell's checkpoints) and answers from the weights; long context and RAG answer with
//! the facts in the prompt. All three go through [`engram_baselines::answer_by`].

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use engram_baselines::{Measured, Method as AnswerMethod, Retriever, answer_by};
use engram_facts::Fact;
use engram_lora::{EpochEval, GgufAdapterType, TrainOutcome, Trainer, write_gguf_adapter};
use engram_model::AnswerConfig;

use crate::cells::{Cell, Method};
use crate::curve::SampleExactMatch;
use crate::record::MethodMetrics;
use crate::sweep::runner::Runner;
use crate::sweep::work::SavedAnswers;

impl Runner<'_> {
    /// Refuses a cell whose estimated peak memory (the `--dry-run` planner's) exceeds what the
    /// device has, before anything is loaded onto it. Skipped where the architecture or the
    /// device's memory is unknown, or with `ENGRAM_SKIP_MEMORY_CHECK=1`.
    fn check_memory(&self, cell: &Cell, facts: &[Fact]) -> Result<()> {
        let exp = self.exp;
        if std::env::var_os("ENGRAM_SKIP_MEMORY_CHECK").is_some_and(|v| v == "1") {
            return Ok(());
        }
        let (Some((cfg, _)), Some(capacity)) = (
            crate::dry_run::architecture(exp),
            engram_model::device_memory(&exp.backend),
        ) else {
            return Ok(());
        };
        let e = crate::estimate::estimate(exp, &cfg, cell, facts, 1.0);
        if e.peak_bytes > capacity as f64 {
            anyhow::bail!(
                "{}: needs about {} (the planner's estimate: weights, adapter state {}, activations), the {} device has {}; run it where there is more memory, or set ENGRAM_SKIP_MEMORY_CHECK=1 to try anyway",
                cell.id(),
                crate::estimate::human_bytes(e.peak_bytes),
                crate::estimate::human_bytes(e.adapter_state_bytes),
                exp.backend,
                crate::estimate::human_bytes(capacity as f64)
            );
        }
        Ok(())
    }

    /// Trains the adapters of LoRA cell `cell` of `rank` into `work` (with its replicate's
    /// seed).
    fn train(
        &mut self,
        cell: &Cell,
        rank: usize,
        facts: &[Fact],
        work: &Path,
    ) -> Result<TrainOutcome> {
        let exp = self.exp;
        let (progress, stop) = (self.progress, self.stop.clone());
        let mut preset = exp.training.clone();
        preset.train.seed = crate::plan::replicate_seed(exp, cell);
        let s = self.session()?;
        // The memorization curve (eval_every): greedy exact match on a fixed sample of the
        // trained questions, answered as the cell answers.
        let cfg = AnswerConfig {
            stop_ids: s.stop_ids.clone(),
            interrupt: stop.clone(),
            ..exp.answer.clone()
        };
        let curve = SampleExactMatch::for_training(&preset.train, &s.tokenizer, facts, cfg);
        let trainer = Trainer {
            tokenizer: &s.tokenizer,
            lora: preset.lora_config(rank),
            train: preset.train,
            base_model: exp.model_source(),
        };
        trainer
            .run_evaluated(
                s.model.clone(),
                facts,
                work,
                true,
                progress.subtask().as_ref(),
                &stop,
                curve.as_ref().map(|c| c as &dyn EpochEval),
            )
            .with_context(|| format!("training into {}", work.display()))
    }

    /// Writes the adapter just trained into `work` as llama.cpp's LoRA adapter GGUF,
    /// `adapters/<cell>.gguf` in the results directory (`[export] gguf = true`).
    fn export_gguf(&mut self, cell: &Cell, work: &Path) -> Result<()> {
        let exp = self.exp;
        let adapter = engram_lora::load_adapter(work)?;
        let dir = self.results.root.join("adapters");
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        let out = dir.join(format!("{}.gguf", cell.id()));
        let ty = match exp.export.gguf_dtype.as_deref() {
            Some("f32") => GgufAdapterType::F32,
            _ => GgufAdapterType::F16,
        };
        // The session the cell trained with holds the base's config: no second open.
        let base = self.session()?;
        write_gguf_adapter(&adapter, &base.config, &base.origin, &out, ty, true)?;
        self.progress.note(&format!(
            "{}: adapter exported for llama.cpp to {}",
            cell.id(),
            out.display()
        ));
        Ok(())
    }

    /// Produces the cell's answers (training first, for LoRA).
    pub fn answer_cell(
        &mut self,
        cell: &Cell,
        facts: &[Fact],
        hash: &str,
        work: &Path,
    ) -> Result<SavedAnswers> {
        let (exp, progress, stop) = (self.exp, self.progress, self.stop.clone());
        let questions: Vec<String> = facts.iter().map(|f| f.question.clone()).collect();
        if matches!(cell.method, Method::Lora { .. }) {
            self.check_memory(cell, facts)?;
        }
        self.session()?;
        let t0 = Instant::now();
        let trained = match cell.method {
            Method::Lora { rank } => {
                let t = self.train(cell, rank, facts, work)?;
                if exp.export.gguf {
                    self.export_gguf(cell, work)?;
                }
                Some(t)
            }
            _ => None,
        };
        let train_s = t0.elapsed().as_secs_f64();
        let dense = matches!(cell.method, Method::Rag) && exp.methods.retriever == "dense";
        let (session, encoder) = if dense {
            let (s, e) = self.session_and_encoder()?;
            (s, Some(e))
        } else {
            (self.session()?, None)
        };
        let method = match cell.method {
            Method::Lora { .. } => AnswerMethod::Weights,
            Method::LongContext => AnswerMethod::LongContext {
                context_cap: exp.model.context_window,
            },
            Method::Rag => AnswerMethod::Rag {
                k: exp.methods.rag_k,
                retriever: encoder.map_or(Retriever::Bm25, Retriever::Dense),
            },
        };
        let cfg = AnswerConfig {
            stop_ids: session.stop_ids.clone(),
            interrupt: stop,
            ..exp.answer.clone()
        };
        let model = trained.as_ref().map_or(&session.model, |t| &t.model);
        let ta = Instant::now();
        let sub = progress.subtask();
        let run = answer_by(
            &method,
            model,
            &session.tokenizer,
            facts,
            &questions,
            &cfg,
            Some(sub.as_ref()),
        )?;
        let metrics = match (&trained, &run.measured) {
            (Some(t), _) => MethodMetrics::Lora {
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
            },
            (None, m) => method_metrics(m),
        };
        Ok(SavedAnswers {
            config_hash: hash.to_string(),
            answers: run.answers.map(|a| a.into_iter().map(|a| a.text).collect()),
            na: run.measured.na_reason(),
            metrics,
            train_s,
            answer_s: ta.elapsed().as_secs_f64(),
        })
    }
}

/// A baseline's figures as its record holds them.
fn method_metrics(m: &Measured) -> MethodMetrics {
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
