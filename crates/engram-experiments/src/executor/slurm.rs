//! The cells to do frozen in a manifest, one Slurm job array per resource class (two where the
//! kernel warm-up's leaders go first), and the table job ([`crate::launch`], [`crate::slurm`]).

use anyhow::Result;
use engram_io::Progress;

use super::{Executor, Job, Outcome, Submitted};
use crate::experiment::Experiment;
use crate::launch::freeze;
use crate::slurm::{SlurmOptions, launch};
use crate::warm_up::wanted;

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
        let warm_up = wanted(&exp.backend, self.options.no_kernel_warm_up);
        let manifest = freeze(
            exp,
            &job.configs,
            &job.results,
            &job.only,
            self.flops,
            warm_up,
        )?;
        let launch = launch(&manifest, &self.options)?;
        Ok(Outcome::Submitted(Submitted { manifest, launch }))
    }
}
