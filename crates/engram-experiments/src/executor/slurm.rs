//! The cells to do frozen in a manifest, one Slurm job array per resource class, and the table
//! job ([`crate::launch`], [`crate::slurm`]).

use anyhow::Result;
use engram_io::Progress;

use super::{Executor, Job, Outcome, Submitted};
use crate::experiment::Experiment;
use crate::launch::freeze;
use crate::slurm::{SlurmOptions, launch};

/// As Slurm job arrays: submits (unless `emit_only`) and returns.
#[derive(Debug, Clone)]
pub struct Slurm {
    /// The scheduler's settings.
    pub options: SlurmOptions,
    /// Sustained FLOP/s the estimates (classes, time limits) assume.
    pub flops: f64,
}

impl Executor for Slurm {
    fn execute(&self, exp: &Experiment, job: &Job, _progress: &dyn Progress) -> Result<Outcome> {
        let manifest = freeze(exp, &job.configs, &job.results, &job.only, self.flops)?;
        let launch = launch(&manifest, &self.options)?;
        Ok(Outcome::Submitted(Submitted { manifest, launch }))
    }
}
