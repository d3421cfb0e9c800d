//! Where a sweep's cells run, behind one trait: here, one after another ([`Local`]); on several
//! devices of this machine, a worker process each ([`Devices`]); or on a Slurm cluster as job
//! arrays ([`Slurm`]). The binary builds one from its flags and calls [`Executor::execute`]
//! once; what came of it ([`Outcome`]) is for the binary to print.

mod devices;
mod local;
mod slurm;

use std::path::PathBuf;

use anyhow::Result;
use engram_io::{Progress, Stop};

use crate::experiment::Experiment;
use crate::launch::Manifest;
use crate::render::Rendered;
use crate::slurm::Launch;
use crate::sweep::SweepReport;

pub use devices::Devices;
pub use local::Local;
pub use slurm::Slurm;

/// What every executor is asked to do.
#[derive(Debug, Clone)]
pub struct Job {
    /// The presets directory the experiment was loaded with.
    pub configs: PathBuf,
    /// The results directory.
    pub results: PathBuf,
    /// `--only` patterns (ids or `*` globs); empty: every cell.
    pub only: Vec<String>,
    /// A request to stop (the binary's signal handlers set it).
    pub stop: Stop,
}

/// Runs a sweep's cells somewhere.
pub trait Executor {
    /// Runs, or hands to a scheduler, the cells of `exp` that `job.only` selects and that are
    /// not done in `job.results`, reporting to `progress`.
    fn execute(&self, exp: &Experiment, job: &Job, progress: &dyn Progress) -> Result<Outcome>;
}

/// What came of a sweep.
#[derive(Debug)]
pub enum Outcome {
    /// The cells ran in this process ([`Local`]).
    Ran(SweepReport),
    /// The cells ran on worker processes, one per device ([`Devices`]).
    OnDevices(DevicesReport),
    /// The cells were handed to Slurm ([`Slurm`]).
    Submitted(Submitted),
}

/// What the workers of [`Devices`] did.
#[derive(Debug, Clone)]
pub struct DevicesReport {
    /// Devices (one worker each).
    pub devices: usize,
    /// Selected cells done now (healthy or not).
    pub done: usize,
    /// Selected cells.
    pub cells: usize,
    /// Workers that did not end cleanly: (label, exit status; `None`: killed).
    pub failed: Vec<(String, Option<i32>)>,
    /// The signal that stopped the sweep, if one did.
    pub stopped: Option<usize>,
    /// The table and views rendered from every record once the workers ended.
    pub rendered: Rendered,
}

/// What [`Slurm`] submitted (or, with `emit_only`, wrote).
#[derive(Debug, Clone)]
pub struct Submitted {
    /// The frozen cells.
    pub manifest: Manifest,
    /// Its file, the scripts and the jobs.
    pub launch: Launch,
}
