//! What the cells of a sweep share, loaded when a cell first needs it: the model session (on
//! the autodiff device when any LoRA cell is to run), the dense retriever's encoder, the judge.

use anyhow::{Context, Result};
use engram_baselines::rag::BertEncoder;
use engram_io::{Progress, Stop};
use engram_judge::Judge;
use engram_model::{Session, SessionSpec};

use crate::experiment::Experiment;
use crate::record::{ResultsDir, Versions};

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
    needs_training: bool,
    session: Option<Session>,
    encoder: Option<BertEncoder>,
    judge: Option<Box<dyn Judge>>,
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
        Self {
            exp,
            results,
            progress,
            stop,
            needs_training,
            session: None,
            encoder: None,
            judge: None,
        }
    }

    /// Whether the model is loaded.
    pub fn has_session(&self) -> bool {
        self.session.is_some()
    }

    /// The model session, loaded on first use.
    pub fn session(&mut self) -> Result<&Session> {
        if self.session.is_none() {
            let exp = self.exp;
            let spec = SessionSpec {
                model: exp.model_source(),
                backend: exp.backend.clone(),
                dtype: exp.model.dtype.clone(),
                train: self.needs_training,
            };
            let s = Session::load(&spec, self.progress.subtask().as_ref())
                .with_context(|| format!("model preset {}", exp.model_file.display()))?;
            self.progress.note(&s.summary(&exp.backend));
            self.session = Some(s);
        }
        Ok(self.session.as_ref().expect("loaded"))
    }

    /// The model session and the dense retriever's encoder (loaded on first use, on the
    /// model's device).
    pub fn session_and_encoder(&mut self) -> Result<(&Session, &BertEncoder)> {
        let device = self.session()?.model.device();
        if self.encoder.is_none() {
            let spec = &self.exp.methods.encoder;
            let sub = self.progress.subtask();
            let dir = engram_checkpoint::model_store::model_dir(spec, sub.as_ref())?;
            let enc = BertEncoder::load(&dir, &device)
                .with_context(|| format!("encoder {}", dir.display()))?;
            self.encoder = Some(enc);
        }
        Ok((
            self.session.as_ref().expect("loaded"),
            self.encoder.as_ref().expect("loaded"),
        ))
    }

    /// The judge, built from the experiment's preset on first use (its notes reported).
    pub fn judge(&mut self) -> Result<&dyn Judge> {
        if self.judge.is_none() {
            let exp = self.exp;
            let judge = exp
                .judge
                .build(&exp.judge_dir(), &self.results.root.join("judge-cache"))
                .with_context(|| format!("judge preset {}", exp.judge_file.display()))?;
            for n in judge.notes() {
                self.progress.note(&n);
            }
            self.judge = Some(judge);
        }
        Ok(self.judge.as_deref().expect("built"))
    }

    /// The versions a record states.
    pub fn versions(&self) -> Versions {
        Versions {
            engram: env!("CARGO_PKG_VERSION").into(),
            burn: super::BURN_VERSION.into(),
            backend: self.exp.backend.clone(),
            judge: self.judge.as_ref().map(|j| j.name()),
        }
    }
}
