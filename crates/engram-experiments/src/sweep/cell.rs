//! One cell from its answers (saved by an earlier run, or made now) to its record: judged, with
//! every question's answer and verdict, its figures and stage timings. A failure of any kind —
//! an error or a panic — becomes a `failed` record and the sweep goes on.

use std::panic::AssertUnwindSafe;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use engram_facts::Fact;
use engram_judge::JudgeItem;

use crate::plan::PlannedCell;
use crate::record::{
    CellMetrics, CellRecord, CellStatus, FORMAT, JudgeCounts, QuestionRecord, Timings,
};
use crate::sweep::runner::Runner;
use crate::sweep::work::SavedAnswers;

/// A judged cell's questions, accuracy and verdict counts.
struct Judged {
    questions: Vec<QuestionRecord>,
    accuracy: Option<f64>,
    counts: Option<JudgeCounts>,
}

/// How a cell ended.
pub enum CellOutcome {
    /// With a record to write (done, NA or failed).
    Record(Box<CellRecord>),
    /// Asked to stop (a signal) before it could finish: no record, its checkpoints and saved
    /// answers kept for the run that resumes it. Holds what stopped it.
    Stopped(String),
}

impl Runner<'_> {
    /// Runs `plan` on `facts`; whatever goes wrong (a panic included) is a failed record,
    /// unless stopping was asked for: then the cell is left unrecorded, to be resumed.
    pub fn run_guarded(&mut self, plan: &PlannedCell, facts: &[Fact]) -> CellOutcome {
        let t0 = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| self.run_cell(plan, facts)))
            .unwrap_or_else(|panic| {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
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
        let id = cell.id();
        let work = self.prepare_work(&id, hash)?;
        let had_session = self.has_session();
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
        let load_s = match (had_session, self.has_session()) {
            (false, true) => self.session()?.load_s,
            _ => 0.0,
        };
        let tj = Instant::now();
        let judged = self.judge_answers(&id, facts, saved.answers.as_deref())?;
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
            versions: self.versions(),
            finished_unix: now(),
        })
    }

    /// Judges `answers` (`None`: NA, every question without an answer or verdict).
    fn judge_answers(
        &mut self,
        id: &str,
        facts: &[Fact],
        answers: Option<&[String]>,
    ) -> Result<Judged> {
        let Some(answers) = answers else {
            let questions = facts
                .iter()
                .map(|f| QuestionRecord {
                    id: f.id.clone(),
                    question: f.question.clone(),
                    gold: f.answer.clone(),
                    answer: None,
                    correct: None,
                    judge_raw: String::new(),
                    judge_follow_up: None,
                })
                .collect();
            return Ok(Judged {
                questions,
                accuracy: None,
                counts: None,
            });
        };
        let items: Vec<JudgeItem> = facts
            .iter()
            .zip(answers)
            .map(|(f, a)| JudgeItem {
                id: f.id.clone(),
                question: f.question.clone(),
                gold: f.answer.clone(),
                answer: Some(a.clone()),
                document: f.source.clone(),
            })
            .collect();
        let judge = self.judge()?;
        let verdicts = judge
            .judge(&items)
            .with_context(|| format!("judging {id} with {}", judge.name()));
        let (name, notes) = (judge.name(), judge.notes());
        for n in notes {
            self.progress.note(&n);
        }
        let verdicts = verdicts?;
        let correct = verdicts.iter().filter(|v| v.correct == Some(true)).count();
        let judged = verdicts.iter().filter(|v| v.correct.is_some()).count();
        let counts = JudgeCounts {
            correct,
            judged,
            judge: name,
        };
        let questions = items
            .into_iter()
            .zip(verdicts)
            .map(|(it, v)| QuestionRecord {
                id: it.id,
                question: it.question,
                gold: it.gold,
                answer: it.answer,
                correct: v.correct,
                judge_raw: v.raw,
                judge_follow_up: v.follow_up,
            })
            .collect();
        Ok(Judged {
            questions,
            accuracy: Some(correct as f64 / facts.len() as f64),
            counts: Some(counts),
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
            versions: self.versions(),
            finished_unix: now(),
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
