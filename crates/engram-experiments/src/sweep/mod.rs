//! The sweep runner: plan the selected cells ([`crate::plan`]), run each one not done — LoRA =
//! train → answer the original questions → judge; long context and RAG = answer → judge — into
//! one record under `results/<experiment>/cells/`, then render the table.
//!
//! Nothing computed is lost: a LoRA cell trains with per-epoch checkpoints in `work/<cell>/`
//! and resumes from them; answers are saved in `work/<cell>/answers.json` before the judge runs
//! (an unreachable judge costs no retraining); records are written atomically. A rerun skips
//! cells whose record matches the current configuration hash, runs again cells that failed,
//! are stale or whose record is corrupt (reported), and finishes interrupted ones.
//!
//! Sweeps sharing a results directory split the cells between them: a cell runs only under its
//! claim ([`crate::lock`]); a cell claimed by a live sweep elsewhere is left to it (reported),
//! and a cell found done once its claim is held (another sweep finished it) is not run again.
//!
//! A sweep asked to stop ([`SweepOptions::stop`]: a signal) ends its running cell at the next
//! training step or answer batch without a record — its checkpoints and saved answers stay for
//! the run that resumes it — starts no further cell, and says so in [`SweepReport::stopped`].
//!
//! - [`runner`]: one cell from its saved or fresh answers (training first, for LoRA) to its
//!   record — the runner's one `impl`;
//! - [`shared`]: the model, encoder and judge, loaded when a cell first needs them;
//! - [`answer`]: the method-dependent steps (memory check, training, GGUF export, figures);
//! - [`judged`]: answers judged into the record's questions and counts;
//! - [`work`]: the per-cell working directories.

pub mod answer;
pub mod judged;
pub mod runner;
pub mod shared;
pub mod work;

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use engram_io::{Progress, Stop};

use crate::cells::Method;
use crate::experiment::Experiment;
use crate::facts::{load_pool, samples};
use crate::launch::FrozenTask;
use crate::lock::{self, Claim, LockSettings};
use crate::plan::{CellState, PlannedCell, current_plan, plan, state_of};
use crate::record::{CellRecord, CellStatus, ResultsDir};
use crate::render::{Rendered, render_dir};
use runner::{CellOutcome, Runner};

/// The Burn release engram is built on (recorded in every cell).
pub const BURN_VERSION: &str = "0.22.1";

/// How to run a sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The results directory (`results/<experiment>` by default).
    pub results: PathBuf,
    /// `--only` patterns (ids or `*` globs); empty: every cell.
    pub only: Vec<String>,
    /// How cell claims beat and go stale.
    pub locks: LockSettings,
    /// A Slurm task's frozen cell: the one cell that runs (selected by its typed key; `only` is
    /// then ignored), checked against the plan before it runs.
    pub frozen: Option<FrozenTask>,
    /// A request to stop (the binary's signal handlers set it): the running cell ends at its
    /// next training step or answer batch, unrecorded and resumable, and no further cell starts.
    pub stop: Stop,
}

/// Why and where a sweep stopped before its end.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// The signal that asked.
    pub signal: usize,
    /// The cell it interrupted (`None`: it stopped between cells), and what that cell said.
    pub cell: Option<(String, String)>,
    /// Cells not started because of it.
    pub not_started: usize,
}

/// What a sweep did, and the table it rendered at the end.
#[derive(Debug, Clone)]
pub struct SweepReport {
    /// Cells run in this invocation.
    pub ran: Vec<String>,
    /// Cells skipped because a matching record exists (also one another sweep finished while
    /// this one ran).
    pub skipped: Vec<String>,
    /// Cells left to another sweep that holds their claim (id, its holder).
    pub elsewhere: Vec<(String, String)>,
    /// Cells that failed (id, error).
    pub failed: Vec<(String, String)>,
    /// Set when the sweep was asked to stop and did before its end.
    pub stopped: Option<Stopped>,
    /// The rendered views of the results directory.
    pub rendered: Rendered,
}

/// Runs the sweep of `exp` (see the module docs), reporting to `progress`: a `sweep` task of
/// one step per cell to run, each cell's loading, training and answering as subtasks, and a
/// note per decision and per finished cell. Returns what ran and the rendered table.
pub fn run_sweep(
    exp: &Experiment,
    opts: &SweepOptions,
    progress: &dyn Progress,
) -> Result<SweepReport> {
    let (pool, source) = load_pool(exp)?;
    let samples = samples(exp, &pool, &source)?;
    let results = ResultsDir::new(&opts.results);
    let planned = match &opts.frozen {
        Some(task) => task.select(plan(exp, &samples, &results, &[]))?,
        None => plan(exp, &samples, &results, &opts.only),
    };
    if planned.is_empty() {
        return Err(anyhow!(
            "--only {:?} selects none of the cells of {}",
            opts.only,
            exp.path.display()
        ));
    }
    results
        .create()
        .with_context(|| format!("cannot use results directory {}", opts.results.display()))?;
    let text = std::fs::read(&exp.path).with_context(|| exp.path.display().to_string())?;
    engram_io::write_file(&results.root.join("experiment.toml"), &text)?;
    // Every cell's current hash, whatever `--only` selects: the table marks the records that
    // an earlier configuration made (or whose cell the experiment no longer has).
    results.write_plan(&current_plan(exp, &samples))?;
    progress.note(&format!(
        "{}: {} cells ({} facts from {}) → {}",
        exp.name,
        planned.len(),
        samples
            .sizes()
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("/"),
        match samples.draws() {
            1 => source,
            k => format!("{source}, {k} draws"),
        },
        opts.results.display()
    ));
    let mut skipped = report_plan(&planned, progress);
    let todo: Vec<PlannedCell> = planned.into_iter().filter(PlannedCell::runs).collect();
    let needs_training = todo
        .iter()
        .any(|p| matches!(p.cell.method, Method::Lora { .. }));
    let mut runner = Runner::new(exp, results, needs_training, progress, opts.stop.clone());
    let (mut ran, mut failed, mut elsewhere) = (Vec::new(), Vec::new(), Vec::new());
    let mut stopped = None;
    progress.begin("sweep", Some(todo.len() as u64));
    for (i, plan) in todo.iter().enumerate() {
        let id = plan.cell.id();
        if let Some(signal) = opts.stop.requested() {
            stopped = Some(Stopped {
                signal,
                cell: None,
                not_started: todo.len() - i,
            });
            break;
        }
        progress.status(&id);
        let lock_path = runner.results.lock_path(&id);
        let claim = match lock::claim(&lock_path, &opts.locks)
            .with_context(|| format!("cannot claim cell {id} ({})", lock_path.display()))?
        {
            Claim::Acquired(l) => l,
            Claim::Held(seen) => {
                let who = seen.holder_name();
                progress.note(&format!("{id}: being run by {who}; left to it"));
                elsewhere.push((id, who));
                progress.advance(1);
                continue;
            }
        };
        match state_of(&runner.results, &id, &plan.hash) {
            CellState::Done => {
                progress.note(&format!("{id}: finished by another sweep meanwhile"));
                skipped.push(id);
                progress.advance(1);
                continue;
            }
            CellState::Unreadable(why) => {
                progress.note(&format!("{why}; left as it is"));
                progress.advance(1);
                continue;
            }
            _ => {}
        }
        progress.note(&format!("{id}: started"));
        let record = match runner.run_guarded(plan, samples.of(&plan.cell)) {
            CellOutcome::Record(r) => r,
            CellOutcome::Stopped(why) => {
                progress.note(&format!(
                    "{id}: stopped; no record written, its checkpoints and saved answers are kept"
                ));
                stopped = Some(Stopped {
                    signal: opts.stop.requested().unwrap_or(1),
                    cell: Some((id, why)),
                    not_started: todo.len() - i - 1,
                });
                break;
            }
        };
        // Taken over while it ran: the record, and the cell's work directory, are the other
        // sweep's now.
        if !claim.still_held() {
            let who =
                lock::inspect(&lock_path).map_or("no sweep now".to_string(), |s| s.holder_name());
            progress.note(&format!(
                "{id}: its claim was taken over while it ran (now {who}); its record is left to \
                 that sweep"
            ));
            elsewhere.push((id, who));
            progress.advance(1);
            continue;
        }
        runner.results.write(&record)?;
        if record.status == CellStatus::Failed {
            failed.push((id.clone(), record.error.clone().unwrap_or_default()));
        } else {
            runner.work.clean(&id);
        }
        progress.note(&outcome_line(&record));
        ran.push(id);
        progress.advance(1);
    }
    progress.end();
    let rendered = render_dir(&runner.results.root, None)?;
    Ok(SweepReport {
        ran,
        skipped,
        elsewhere,
        failed,
        stopped,
        rendered,
    })
}

/// Notes why each cell that ran before runs again; returns the cells already done.
fn report_plan(planned: &[PlannedCell], progress: &dyn Progress) -> Vec<String> {
    let mut skipped = Vec::new();
    for p in planned {
        let id = p.cell.id();
        match &p.state {
            CellState::Done => skipped.push(id),
            CellState::Stale => progress.note(&format!(
                "{id}: its record was made with another configuration; running it again"
            )),
            CellState::Failed(e) => {
                progress.note(&format!("{id}: failed before ({e}); trying again"))
            }
            CellState::Corrupt(why) => progress.note(&format!("{why}; running the cell again")),
            CellState::Unreadable(why) => progress.note(&format!(
                "{why}; not run, so that a passing read error cannot replace its record: run \
                 the sweep again once it reads"
            )),
            CellState::Missing => {}
        }
    }
    if !skipped.is_empty() {
        progress.note(&format!(
            "{} cells already done: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    skipped
}

/// The log line of a finished cell.
fn outcome_line(r: &CellRecord) -> String {
    let id = &r.cell_id;
    match r.status {
        CellStatus::Done => format!(
            "{id}: accuracy {:.3} ({}/{}) in {:.0} s",
            r.accuracy.unwrap_or(0.0),
            r.metrics.judged.as_ref().map_or(0, |j| j.correct),
            r.questions.len(),
            r.timings.total_s
        ),
        CellStatus::Na => format!("{id}: NA ({})", r.error.clone().unwrap_or_default()),
        CellStatus::Failed => format!("{id}: FAILED: {}", r.error.clone().unwrap_or_default()),
    }
}
