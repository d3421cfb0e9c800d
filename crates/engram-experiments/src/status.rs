//! `engram sweep --status`: every cell's state read from the results directory alone — its
//! record and its claim ([`crate::lock`]) — so it works from any machine that sees the
//! directory, on clusters without Slurm accounting too.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::experiment::Experiment;
use crate::facts::{load_pool, samples};
use crate::health::{Health, health_of};
use crate::lock::{LockSettings, inspect};
use crate::plan::{CellState, plan};
use crate::record::{Found, ResultsDir};

/// One cell's state.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// A record for the current configuration.
    Done,
    /// A record for the current configuration of a training run that went wrong
    /// ([`crate::health`]): `diverged — why` or `collapsed — why`.
    DoneUnhealthy(String),
    /// Claimed by a live sweep: who, and how long ago its claim last beat.
    Running {
        /// The holder (`host H, pid P, job J`).
        by: String,
        /// Age of its heartbeat.
        heartbeat: Duration,
    },
    /// Failed when last run (the error).
    Failed(String),
    /// Not run, or run with another configuration, or its record is corrupt (why); a stale
    /// claim (its holder died) is named.
    ToDo(String),
}

/// The status of each selected cell of `exp` in `results`, in table order.
pub fn status(
    exp: &Experiment,
    results: &Path,
    only: &[String],
    locks: &LockSettings,
) -> Result<Vec<(String, Status)>> {
    let (pool, source) = load_pool(exp)?;
    let samples = samples(exp, &pool, &source)?;
    let dir = ResultsDir::new(results);
    let mut out = Vec::new();
    for p in plan(exp, &samples, &dir, only) {
        let id = p.cell.id();
        let claim = inspect(&dir.lock_path(&id));
        let s = match (&p.state, &claim) {
            (CellState::Done, _) => match dir.read(&id) {
                Found::Record(r) => match health_of(&r) {
                    Health::Fine => Status::Done,
                    h => Status::DoneUnhealthy(format!("{} — {}", h.kind(), h.why())),
                },
                _ => Status::Done,
            },
            (_, Some(c)) if !c.is_stale(locks) => Status::Running {
                by: c.holder_name(),
                heartbeat: c.age,
            },
            (CellState::Failed(e), _) => Status::Failed(e.clone()),
            (state, stale) => {
                let why = match state {
                    CellState::Stale => "its record has another configuration".to_string(),
                    CellState::Corrupt(why) | CellState::Unreadable(why) => why.clone(),
                    _ => progress(&dir.work_dir().join(&id)),
                };
                match stale {
                    Some(c) => Status::ToDo(format!(
                        "{why}; abandoned claim by {} (no heartbeat for {:.0} s)",
                        c.holder_name(),
                        c.age.as_secs_f64()
                    )),
                    None => Status::ToDo(why),
                }
            }
        };
        out.push((id, s));
    }
    Ok(out)
}

/// What a cell without a record has done so far: `not run`, or the epochs its interrupted
/// training checkpointed (`work/<cell>/train_record.json`).
fn progress(work: &Path) -> String {
    let rec: Option<serde_json::Value> = std::fs::read(work.join(engram_lora::TRAIN_RECORD))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    match rec {
        Some(r) => {
            let done = r["epochs"].as_array().map_or(0, Vec::len);
            let of = r["train"]["epochs"].as_u64().unwrap_or(0);
            let how = match r["status"].as_str() {
                Some("stopped") => "stopped",
                _ => "interrupted",
            };
            format!("{how} after epoch {done} of {of}; resumes from its checkpoint")
        }
        None => "not run".to_string(),
    }
}

/// The status report: a line per cell, then the counts.
pub fn render_status(cells: &[(String, Status)]) -> String {
    let mut out = String::new();
    let (mut done, mut running, mut failed, mut todo) = (0, 0, 0, 0);
    for (id, s) in cells {
        let line = match s {
            Status::Done => {
                done += 1;
                "done".to_string()
            }
            Status::DoneUnhealthy(why) => {
                done += 1;
                format!("done, but its training {why} (the table shows no accuracy for it)")
            }
            Status::Running { by, heartbeat } => {
                running += 1;
                format!(
                    "running on {by} (heartbeat {:.0} s ago)",
                    heartbeat.as_secs_f64()
                )
            }
            Status::Failed(e) => {
                failed += 1;
                format!("failed: {e}")
            }
            Status::ToDo(why) => {
                todo += 1;
                format!("to do ({why})")
            }
        };
        out.push_str(&format!("{id:<28} {line}\n"));
    }
    out.push_str(&format!(
        "{done} done, {running} running, {failed} failed, {todo} to do\n"
    ));
    out
}
