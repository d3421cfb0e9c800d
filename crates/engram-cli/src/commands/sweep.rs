//! `engram sweep`: run an experiment's cells (facts × methods), resumably, and render its table.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use engram_experiments::estimate::default_flops;
use engram_experiments::lock::LockSettings;
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
    if a.status {
        let cells = engram_experiments::status::status(&exp, &results, &a.only, &locks)?;
        print!("{}", engram_experiments::status::render_status(&cells));
        return Ok(());
    }
    if a.dry_run {
        let flops = a
            .tflops
            .map_or_else(|| default_flops(&exp.backend), |t| t * 1e12);
        print!(
            "{}",
            engram_experiments::dry_run::dry_run(&exp, &results, &a.only, flops)?
        );
        return Ok(());
    }
    let report = run_sweep(
        &exp,
        &SweepOptions {
            results: results.clone(),
            only: a.only.clone(),
            locks,
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
