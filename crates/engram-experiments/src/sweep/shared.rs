//! What the cells of a sweep share, loaded when a cell first needs it: the model session (on
//! the autodiff device when any LoRA cell is to run), the dense retriever's encoder, the judge.

use std::path::PathBuf;

use anyhow::{Context, Result};
use engram_baselines::rag::BertEncoder;
use engram_io::Progress;
use engram_judge::Judge;
use engram_model::{Session, SessionSpec};

use crate::experiment::Experiment;

/// The model, encoder and judge of one sweep, each loaded once, on first use.
pub struct Shared<'a> {
    exp: &'a Experiment,
    progress: &'a dyn Progress,
    judge_cache: PathBuf,
    needs_training: bool,
    session: Option<Session>,
    encoder: Option<BertEncoder>,
    judge: Option<Box<dyn Judge>>,
}

impl<'a> Shared<'a> {
    /// Nothing loaded yet; `needs_training` puts the model on an autodiff device; the judge
    /// caches its calls in `judge_cache`.
    pub fn new(
        exp: &'a Experiment,
        judge_cache: PathBuf,
        needs_training: bool,
        progress: &'a dyn Progress,
    ) -> Self {
        Self {
            exp,
            progress,
            judge_cache,
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
                .build(&exp.judge_dir(), &self.judge_cache)
                .with_context(|| format!("judge preset {}", exp.judge_file.display()))?;
            for n in judge.notes() {
                self.progress.note(&n);
            }
            self.judge = Some(judge);
        }
        Ok(self.judge.as_deref().expect("built"))
    }

    /// The judge's name, once it is built.
    pub fn judge_name(&self) -> Option<String> {
        self.judge.as_ref().map(|j| j.name())
    }
}
