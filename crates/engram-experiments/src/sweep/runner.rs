//! The runner of one sweep's cells: a cell from its answers (saved by an earlier run, or made
//! now — training first, for LoRA) to its judged record. A failure of any kind — an error or a
//! panic — becomes a `failed` record and the sweep goes on; a requested stop leaves the cell
//! unrecorded, to be resumed.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, anyhow};
use engram_baselines::{Method as AnswerMethod, Retriever, answer_by};
use engram_facts::Fact;
use engram_io::{Progress, Stop};
use engram_model::AnswerConfig;
use engram_model::kernel_cache::{self, CompileSummary};

use super::answer::{check_memory, export_gguf, lora_metrics, method_metrics, train};
use super::judged::{judge_answers, not_applicable};
use super::shared::Shared;
use super::work::{SavedAnswers, WorkDirs};
use crate::cells::{Cell, Method};
use crate::experiment::Experiment;
use crate::plan::PlannedCell;
use crate::record::{CellMetrics, CellRecord, CellStatus, FORMAT, ResultsDir, Timings, Versions};

/// How a cell ended.
pub enum CellOutcome {
    /// With a record to write (done, NA or failed).
    Record(Box<CellRecord>),
    /// Asked to stop (a signal) before it could finish: no record, its checkpoints and saved
    /// answers kept for the run that resumes it. Holds what stopped it.
    Stopped(String),
}

/// Runs the cells of one sweep.
pub struct Runner<'a> {
    /// The experiment.
    pub exp: &'a Experiment,
    /// Where records and working files go.
    pub results: ResultsDir,
    /// Where the sweep reports.
    pub progress: &'a dyn Progress,
    /// A request to stop (a signal): training ends at its next step, answering at its next
    /// batch, the sweep before its next cell.
    pub stop: Stop,
    /// The cells' working directories.
    pub work: WorkDirs,
    shared: Shared<'a>,
}

impl<'a> Runner<'a> {
    /// A runner that loads nothing yet; `needs_training` puts the model on an autodiff device.
    pub fn new(
        exp: &'a Experiment,
        results: ResultsDir,
        needs_training: bool,
        progress: &'a dyn Progress,
        stop: Stop,
    ) -> Self {
        let shared = Shared::new(
            exp,
            results.root.join("judge-cache"),
            needs_training,
            progress,
        );
        let work = WorkDirs {
            root: results.work_dir(),
            keep_adapters: exp.training.keep_adapters,
        };
        Self {
            exp,
            results,
            progress,
            stop,
            work,
            shared,
        }
    }

    /// Runs `plan` on `facts`; whatever goes wrong (a panic included) is a failed record,
    /// unless stopping was asked for: then the cell is left unrecorded, to be resumed.
    pub fn run_guarded(&mut self, plan: &PlannedCell, facts: &[Fact]) -> CellOutcome {
        let t0 = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| self.run_cell(plan, facts)))
            .unwrap_or_else(|panic| {
                let msg = engram_model::device::panic_text(panic.as_ref());
                Err(anyhow!("panicked: {msg}"))
            });
        match result {
            Ok(record) => CellOutcome::Record(Box::new(record)),
            // A failure while stopping is most likely the stop itself; either way the cell
            // runs again next time, as a failed one would.
            Err(e) if self.stop.requested().is_some() => {
                CellOutcome::Stopped(engram_io::error_text(e.as_ref()))
            }
            Err(e) => CellOutcome::Record(Box::new(self.failed_record(
                plan,
                engram_io::error_text(e.as_ref()),
                t0.elapsed().as_secs_f64(),
            ))),
        }
    }

    fn run_cell(&mut self, plan: &PlannedCell, facts: &[Fact]) -> Result<CellRecord> {
        let (cell, hash) = (&plan.cell, plan.hash.as_str());
        let t0 = Instant::now();
        let kernels_before = self.compile_work();
        let id = cell.id();
        let work = self.work.prepare(&id, hash)?;
        let had_session = self.shared.has_session();
        let saved = match SavedAnswers::read(&work, hash) {
            Some(s) => {
                self.progress.note(&format!(
                    "{id}: answers saved by an earlier run; judging them"
                ));
                s
            }
            None => {
                let s = self.answer_cell(cell, facts, hash, &work)?;
                s.write(&work)?;
                s
            }
        };
        let load_s = match (had_session, self.shared.has_session()) {
            (false, true) => self.shared.session()?.load_s,
            _ => 0.0,
        };
        let tj = Instant::now();
        let judged = match saved.answers.as_deref() {
            Some(answers) => {
                let judge = self.shared.judge()?;
                judge_answers(judge, &id, facts, answers, self.progress)?
            }
            None => not_applicable(facts),
        };
        let judge_s = tj.elapsed().as_secs_f64();
        Ok(CellRecord {
            format: FORMAT,
            experiment: self.exp.name.clone(),
            cell_id: id,
            cell: *cell,
            config_hash: hash.to_string(),
            config: plan.config.clone(),
            status: if saved.answers.is_some() {
                CellStatus::Done
            } else {
                CellStatus::Na
            },
            error: saved.na.clone(),
            accuracy: judged.accuracy,
            metrics: CellMetrics {
                judged: judged.counts,
                method: Some(saved.metrics),
            },
            questions: judged.questions,
            timings: Timings {
                load_s,
                train_s: saved.train_s,
                answer_s: saved.answer_s,
                judge_s,
                total_s: t0.elapsed().as_secs_f64(),
            },
            kernels: kernels_before.map(|before| kernel_cache::summary().since(&before)),
            versions: self.versions(),
            finished_unix: now(),
        })
    }

    /// Produces the cell's answers (training first, for LoRA).
    fn answer_cell(
        &mut self,
        cell: &Cell,
        facts: &[Fact],
        hash: &str,
        work: &Path,
    ) -> Result<SavedAnswers> {
        let (exp, progress) = (self.exp, self.progress);
        let questions: Vec<String> = facts.iter().map(|f| f.question.clone()).collect();
        if matches!(cell.method, Method::Lora { .. }) {
            check_memory(exp, cell, facts)?;
        }
        // Loaded before the clock starts: the record times the load on its own.
        self.shared.session()?;
        let t0 = Instant::now();
        let trained = match cell.method {
            Method::Lora { .. } => {
                let session = self.shared.session()?;
                let t = train(exp, session, cell, facts, work, progress, &self.stop)?;
                if exp.export.gguf {
                    export_gguf(exp, session, &self.results.root, cell, work, progress)?;
                }
                Some(t)
            }
            _ => None,
        };
        let train_s = t0.elapsed().as_secs_f64();
        let dense = matches!(cell.method, Method::Rag) && exp.methods.retriever == "dense";
        let (session, encoder) = if dense {
            let (s, e) = self.shared.session_and_encoder()?;
            (s, Some(e))
        } else {
            (self.shared.session()?, None)
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
            interrupt: self.stop.clone(),
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
        let metrics = match &trained {
            Some(t) => lora_metrics(t),
            None => method_metrics(&run.measured),
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

    fn failed_record(&self, plan: &PlannedCell, error: String, total_s: f64) -> CellRecord {
        CellRecord {
            format: FORMAT,
            experiment: self.exp.name.clone(),
            cell_id: plan.cell.id(),
            cell: plan.cell,
            config_hash: plan.hash.clone(),
            config: plan.config.clone(),
            status: CellStatus::Failed,
            error: Some(error),
            accuracy: None,
            metrics: CellMetrics::default(),
            questions: Vec::new(),
            timings: Timings {
                total_s,
                ..Timings::default()
            },
            kernels: None,
            versions: self.versions(),
            finished_unix: now(),
        }
    }

    /// The process's compile work so far where the experiment runs on a GPU backend (its kernel
    /// cache set up first, so that the cell that opens the device counts from zero); `None` on
    /// the CPU.
    fn compile_work(&self) -> Option<CompileSummary> {
        engram_model::is_gpu_backend(&self.exp.backend).then(|| {
            kernel_cache::configure();
            kernel_cache::summary()
        })
    }

    /// The versions a record states.
    fn versions(&self) -> Versions {
        Versions {
            engram: env!("CARGO_PKG_VERSION").into(),
            burn: super::BURN_VERSION.into(),
            backend: self.exp.backend.clone(),
            judge: self.shared.judge_name(),
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
