//! The cells run here, one after another ([`crate::sweep::run_sweep`]).

use anyhow::Result;
use engram_io::Progress;

use super::{Executor, Job, Outcome};
use crate::experiment::Experiment;
use crate::launch::FrozenTask;
use crate::lock::LockSettings;
use crate::sweep::{SweepOptions, run_sweep};

/// In this process, one cell after another: a sweep on one device, or the one cell of a Slurm
/// task (`frozen`).
#[derive(Debug, Clone, Default)]
pub struct Local {
    /// How cell claims beat and go stale.
    pub locks: LockSettings,
    /// A Slurm task's frozen cell, checked against the plan before it runs.
    pub frozen: Option<FrozenTask>,
}

impl Executor for Local {
    fn execute(&self, exp: &Experiment, job: &Job, progress: &dyn Progress) -> Result<Outcome> {
        let opts = SweepOptions {
            results: job.results.clone(),
            only: job.only.clone(),
            locks: self.locks,
            frozen: self.frozen.clone(),
            stop: job.stop.clone(),
        };
        Ok(Outcome::Ran(run_sweep(exp, &opts, progress)?))
    }
}
