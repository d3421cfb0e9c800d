//! What came of a sweep, printed: the table and a summary line when its cells ran (here or on
//! several devices), the jobs when they went to Slurm.

use anyhow::{Result, bail};
use engram_experiments::Experiment;
use engram_experiments::SweepReport;
use engram_experiments::{DevicesReport, Job, Submitted};
use engram_io::Stop;

use super::{SweepArgs, stopped};
use crate::signals::{self, ExitStatus};

/// The cells ran in this process.
pub fn ran(report: &SweepReport, job: &Job, a: &SweepArgs, stop: &Stop) -> Result<()> {
    if let Some(st) = &report.stopped {
        return stopped::stopped(st, a, stop);
    }
    println!("{}", report.rendered.markdown);
    eprintln!(
        "{} cells run, {} already done{}; table, plot and per-fact view in {}",
        report.ran.len(),
        report.skipped.len(),
        match report.elsewhere.len() {
            0 => String::new(),
            n => format!(", {n} being run by other sweeps (see --status)"),
        },
        job.results.display()
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

/// The cells ran on a worker per device.
pub fn on_devices(r: &DevicesReport, job: &Job) -> Result<()> {
    if let Some(sig) = r.stopped {
        eprintln!(
            "stopped by {}: {} cells done, the rest resume when you run the same command again",
            signals::name(sig),
            r.done
        );
        return Err(ExitStatus(signals::exit_status(sig)).into());
    }
    println!("{}", r.rendered.markdown);
    eprintln!(
        "{} of {} cells done on {} devices; table, plot and per-fact view in {}",
        r.done,
        r.cells,
        r.devices,
        job.results.display()
    );
    if !r.failed.is_empty() {
        let which: Vec<String> = r
            .failed
            .iter()
            .map(|(l, c)| match c {
                Some(c) => format!("{l} (exit status {c})"),
                None => format!("{l} (killed)"),
            })
            .collect();
        bail!(
            "workers that did not finish cleanly: {} (their lines above say why; rerun to retry their cells)",
            which.join(", ")
        );
    }
    Ok(())
}

/// The cells went to Slurm (or, with --emit-only, into scripts).
pub fn submitted(s: &Submitted, exp: &Experiment) -> Result<()> {
    let (m, launch) = (&s.manifest, &s.launch);
    println!(
        "manifest {} ({} cells to run)",
        launch.manifest.display(),
        m.cells.len()
    );
    let leaders: usize = m.classes.iter().map(|c| c.leaders).sum();
    if leaders > 0 {
        println!(
            "kernel warm-up: {leaders} of the {} cells (the cheapest of each method) go first to fill the kernel cache; the rest start once those have ended (--no-kernel-warm-up: all at once)",
            m.cells.len()
        );
    }
    if !m.warm.is_empty() {
        println!(
            "kernel warm-up: not needed for the methods of {} (done on this backend before, their kernels are in the cache)",
            m.warm.join(", ")
        );
    }
    for a in &launch.arrays {
        let job = a
            .job
            .as_ref()
            .map_or("not submitted".to_string(), |id| format!("job {id}"));
        let after: Vec<&str> = a
            .after
            .iter()
            .map(|&j| {
                let l = &launch.arrays[j];
                l.job.as_deref().unwrap_or(l.name.as_str())
            })
            .collect();
        let after = match after.is_empty() {
            true => String::new(),
            false => format!(", after {}", after.join(", ")),
        };
        println!(
            "  {}: {} cells, {} → {job}{after}",
            a.name,
            a.count,
            a.script.display()
        );
    }
    match &launch.table_job {
        Some(id) => println!(
            "  table: job {id}, once the arrays end; follow with: engram sweep {} --status",
            exp.path.display()
        ),
        None if m.cells.is_empty() => println!("nothing to run: every cell is done"),
        None => println!(
            "--emit-only: nothing submitted (sbatch the scripts in this order, one shown `after` others with --dependency=afterany:<their job ids>, then {})",
            launch.table_script.display()
        ),
    }
    Ok(())
}
