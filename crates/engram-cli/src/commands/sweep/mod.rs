//! `engram sweep`: run an experiment's cells (facts × methods), resumably, and render its table
//! — here, on several local devices or as Slurm job arrays, through one
//! [`engram_experiments::Executor`] built from the flags; what came of it is printed
//! here ([`report`]), and a sweep asked to stop says what it kept ([`stopped`]). A corpus
//! experiment's verified facts are made ready first ([`facts`]).

mod facts;
mod report;
mod stopped;

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use engram_experiments::LockSettings;
use engram_experiments::Manifest;
use engram_experiments::SlurmOptions;
use engram_experiments::default_flops;
use engram_experiments::{Devices, Executor, Job, Local, Outcome, Slurm};
use engram_experiments::{Experiment, default_configs_dir};

use crate::progress::Bars;
use crate::signals;

/// Arguments of `engram sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The experiment file (e.g. experiments/smoke.toml).
    pub experiment: PathBuf,
    /// The presets directory (default: configs/ beside the experiments/ directory).
    #[arg(long)]
    pub configs: Option<PathBuf>,
    /// The results directory (default: results/<experiment name>).
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// Run only these cells: ids (n10-lora-r8) or globs (n10-*, *-rag), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// List the cells with their status and an estimate of time and peak memory; run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Sustained TFLOP/s assumed by --dry-run (default by backend: cpu 0.05, wgpu 20, cuda 200).
    #[arg(long)]
    pub tflops: Option<f64>,
    /// Show each cell's state from its record and claim (done / running on host H as job J /
    /// failed / to do); run nothing. Works from any machine that sees the results directory.
    #[arg(long, conflicts_with = "dry_run")]
    pub status: bool,
    /// Log lines only, no progress bars (also when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Run on this device instead of the experiment's backend: cpu, wgpu[:N], cuda[:N] (the
    /// backend is not part of a cell's configuration: records stay valid).
    #[arg(long)]
    pub device: Option<String>,
    /// Several devices of this machine, one cell on each at a time (comma-separated, e.g.
    /// cuda:0,cuda:1): one worker process per device, sharing the results through the claims.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["device", "manifest"])]
    pub devices: Vec<String>,
    /// Where the cells run: here, one after another (`local`), or as Slurm job arrays
    /// (`slurm`: submits and returns; follow with --status).
    #[arg(long, value_enum, default_value = "local")]
    pub executor: ExecutorArg,
    /// For an experiment whose facts come from a corpus: generate them again when the fact file
    /// was made with other QA settings (without it, that is an error naming what changed).
    #[arg(long)]
    pub rebuild_facts: bool,
    /// (What a Slurm task runs.) The launch manifest to take the cell from.
    #[arg(long, requires = "cell_index")]
    pub manifest: Option<PathBuf>,
    /// (What a Slurm task runs.) The index of the cell in the manifest.
    #[arg(long, requires = "manifest")]
    pub cell_index: Option<usize>,
    #[command(flatten, next_help_heading = "Slurm (--executor slurm)")]
    pub slurm: SlurmOptions,
}

/// Where a sweep's cells run (`--executor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExecutorArg {
    /// In this process, one after another.
    Local,
    /// As Slurm job arrays, one per resource class.
    Slurm,
}

/// Runs `engram sweep`.
pub fn run(a: SweepArgs) -> Result<()> {
    let configs = a
        .configs
        .clone()
        .unwrap_or_else(|| default_configs_dir(&a.experiment));
    let mut exp = Experiment::load(&a.experiment, &configs)?;
    if let Some(d) = &a.device {
        exp.backend = d.clone();
    }
    let results = a
        .results
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(&exp.name));
    let locks = LockSettings::default();
    let flops = a
        .tflops
        .map_or_else(|| default_flops(&exp.backend), |t| t * 1e12);
    let (results, only, frozen) = match (&a.manifest, a.cell_index) {
        (Some(path), Some(i)) => {
            let m = Manifest::read(path)?;
            let task = m.task(path, i)?;
            (m.results, vec![task.cell.id.clone()], Some(task))
        }
        _ => (results, a.only.clone(), None),
    };
    let stop = signals::install()?;
    if exp.facts.source == "corpus" && a.manifest.is_none() && !a.status && !a.dry_run {
        facts::prepare(&exp, a.rebuild_facts, &stop, &Bars::new(!a.no_progress))?;
    }
    if a.status {
        let cells = engram_experiments::status(&exp, &results, &only, &locks)?;
        print!("{}", engram_experiments::render_status(&cells));
        return Ok(());
    }
    if a.dry_run {
        print!(
            "{}",
            engram_experiments::dry_run(&exp, &results, &only, flops)?
        );
        return Ok(());
    }
    let slurm = a.executor == ExecutorArg::Slurm && a.manifest.is_none();
    if slurm && !a.devices.is_empty() {
        bail!(
            "--devices runs the cells here; with --executor slurm ask for GPUs with --gpus-per-cell"
        );
    }
    let executor: Box<dyn Executor> = if slurm {
        Box::new(Slurm {
            options: SlurmOptions {
                engram: std::env::current_exe()?,
                ..a.slurm.clone()
            },
            flops,
        })
    } else if !a.devices.is_empty() {
        Box::new(Devices {
            devices: a.devices.clone(),
            engram: std::env::current_exe()?,
        })
    } else {
        Box::new(Local { locks, frozen })
    };
    let job = Job {
        configs,
        results,
        only,
        stop: stop.clone(),
    };
    match executor.execute(&exp, &job, &Bars::new(!a.no_progress))? {
        Outcome::Ran(r) => report::ran(&r, &job, &a, &stop),
        Outcome::OnDevices(r) => report::on_devices(&r, &job),
        Outcome::Submitted(s) => report::submitted(&s, &exp),
    }
}
