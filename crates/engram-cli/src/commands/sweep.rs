//! `engram sweep`: run an experiment's cells (facts × methods), resumably, and render its table.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use engram_experiments::estimate::default_flops;
use engram_experiments::launch::{Manifest, freeze};
use engram_experiments::lock::LockSettings;
use engram_experiments::slurm::{self, SlurmOptions};
use engram_experiments::{Experiment, SweepOptions, default_configs_dir, run_sweep};

use crate::progress::Bars;

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
    /// Where the cells run: here, one after another (`local`), or as Slurm job arrays
    /// (`slurm`: submits and returns; follow with --status).
    #[arg(long, value_enum, default_value = "local")]
    pub executor: Executor,
    /// Slurm partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// Slurm account.
    #[arg(long)]
    pub account: Option<String>,
    /// Slurm QOS.
    #[arg(long)]
    pub qos: Option<String>,
    /// Time limit of each Slurm task: `auto` (the dry-run's estimate of its class × 2 + 15 min)
    /// or as Slurm reads it (D-HH:MM, HH:MM:SS).
    #[arg(long, default_value = "auto")]
    pub time: String,
    /// GPUs each cell asks Slurm for (`--gres=gpu:N`).
    #[arg(long, default_value_t = 0)]
    pub gpus_per_cell: u32,
    /// Tasks of one job array running at once.
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// A further #SBATCH argument (repeatable), e.g. --sbatch-arg=--mem=32G.
    #[arg(long = "sbatch-arg", allow_hyphen_values = true)]
    pub sbatch_args: Vec<String>,
    /// A shell line each Slurm task runs before engram (repeatable): module loads, environment.
    #[arg(long)]
    pub setup: Vec<String>,
    /// Write the manifest and the Slurm scripts, submit nothing.
    #[arg(long)]
    pub emit_only: bool,
    /// (What a Slurm task runs.) The launch manifest to take the cell from.
    #[arg(long, requires = "cell_index")]
    pub manifest: Option<PathBuf>,
    /// (What a Slurm task runs.) The index of the cell in the manifest.
    #[arg(long, requires = "manifest")]
    pub cell_index: Option<usize>,
}

/// Where a sweep's cells run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Executor {
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
    let exp = Experiment::load(&a.experiment, &configs)?;
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
    if a.executor == Executor::Slurm && a.manifest.is_none() && !a.status && !a.dry_run {
        return submit(&a, &exp, &configs, &results, flops);
    }
    if a.status {
        let cells = engram_experiments::status::status(&exp, &results, &only, &locks)?;
        print!("{}", engram_experiments::status::render_status(&cells));
        return Ok(());
    }
    if a.dry_run {
        print!(
            "{}",
            engram_experiments::dry_run::dry_run(&exp, &results, &only, flops)?
        );
        return Ok(());
    }
    let report = run_sweep(
        &exp,
        &SweepOptions {
            results: results.clone(),
            only,
            locks,
            frozen,
        },
        &Bars::new(!a.no_progress),
    )?;
    println!("{}", report.rendered.markdown);
    eprintln!(
        "{} cells run, {} already done{}; table, plot and per-fact view in {}",
        report.ran.len(),
        report.skipped.len(),
        match report.elsewhere.len() {
            0 => String::new(),
            n => format!(", {n} being run by other sweeps (see --status)"),
        },
        results.display()
    );
    if !report.failed.is_empty() {
        for (id, e) in &report.failed {
            eprintln!("  {id} failed: {e}");
        }
        bail!(
            "{} cells failed (recorded; rerun the sweep to try them again)",
            report.failed.len()
        );
    }
    Ok(())
}

/// `--executor slurm`: freeze the cells to do, write the scripts, submit (unless --emit-only).
fn submit(
    a: &SweepArgs,
    exp: &Experiment,
    configs: &std::path::Path,
    results: &std::path::Path,
    flops: f64,
) -> Result<()> {
    let m = freeze(exp, configs, results, &a.only, flops)?;
    let opts = SlurmOptions {
        partition: a.partition.clone(),
        account: a.account.clone(),
        qos: a.qos.clone(),
        time: (a.time != "auto").then(|| a.time.clone()),
        gpus_per_cell: a.gpus_per_cell,
        max_parallel: a.max_parallel,
        sbatch_args: a.sbatch_args.clone(),
        setup: a.setup.clone(),
        emit_only: a.emit_only,
        engram: std::env::current_exe()?,
    };
    let launch = slurm::launch(&m, &opts)?;
    println!(
        "manifest {} ({} cells to run)",
        launch.manifest.display(),
        m.cells.len()
    );
    for (class, script) in m.classes.iter().zip(&launch.scripts) {
        let job = launch
            .arrays
            .iter()
            .find(|(c, _)| *c == class.name)
            .map_or("not submitted".to_string(), |(_, id)| format!("job {id}"));
        println!(
            "  {}: {} cells, {} → {job}",
            class.name,
            class.count,
            script.display()
        );
    }
    match &launch.table_job {
        Some(id) => println!(
            "  table: job {id}, once the arrays end; follow with: engram sweep {} --status",
            exp.path.display()
        ),
        None if m.cells.is_empty() => println!("nothing to run: every cell is done"),
        None => println!(
            "--emit-only: nothing submitted (sbatch each script, then {})",
            launch.scripts.last().expect("table script").display()
        ),
    }
    Ok(())
}
