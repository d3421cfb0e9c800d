//! `engram sweep --executor slurm`: the cells to do frozen in a manifest, one job array per
//! resource class, and the table job.

use std::path::Path;

use anyhow::Result;
use engram_experiments::Experiment;
use engram_experiments::launch::freeze;
use engram_experiments::slurm::{self, SlurmOptions};

use super::SweepArgs;

/// `--executor slurm`: freeze the cells to do, write the scripts, submit (unless --emit-only).
pub fn submit(
    a: &SweepArgs,
    exp: &Experiment,
    configs: &Path,
    results: &Path,
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
        max_restarts: a.max_restarts,
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
