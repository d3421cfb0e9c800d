//! A sweep that was asked to stop: what is kept, and for a Slurm task stopped by its time
//! limit's warning (or a preemption's), requeueing itself.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use engram_experiments::Stopped;
use engram_io::Stop;

use super::SweepArgs;
use crate::signals::{self, ExitStatus};

/// Says where a stopped sweep stands; a Slurm task stopped by its time limit requeues itself
/// (at most `--max-restarts` times). Ends with the signal's exit status.
pub fn stopped(st: &Stopped, a: &SweepArgs, stop: &Stop) -> Result<()> {
    let why = signals::name(st.signal);
    match &st.cell {
        Some((id, what)) => eprintln!("stopped by {why} in {id}: {what}"),
        None => eprintln!("stopped by {why} between cells"),
    }
    eprintln!(
        "nothing finished is lost: finished cells are recorded, an interrupted one resumes from its newest epoch checkpoint{}",
        match st.not_started {
            0 => String::new(),
            n => format!("; {n} cells left unstarted by this sweep"),
        }
    );
    let job = engram_experiments::slurm_job();
    match (&job, st.signal) {
        (Some(job), signals::TIME_LIMIT) => requeue(job, a.max_restarts, stop)?,
        (Some(job), _) => eprintln!(
            "Slurm job {job}: not requeued by engram (a preemption that requeues, or scontrol requeue, runs it again; after scancel, submit again)"
        ),
        (None, _) => eprintln!("run the same command again to go on"),
    }
    Err(ExitStatus(signals::exit_status(st.signal)).into())
}

/// How long a task that requeued itself waits for Slurm to end it.
const REQUEUE_WAIT: Duration = Duration::from_secs(120);

/// `scontrol requeue JOB`, unless the job was requeued `max` times already; then waits (at
/// most [`REQUEUE_WAIT`]) for Slurm to end this run with SIGTERM. Measured on slurm-wlm 22.05:
/// a job that exits by itself after its warning signal is recorded FAILED and not requeued,
/// also when it asked to be; one that waits to be ended is requeued (submitit's pattern).
fn requeue(job: &str, max: u32, stop: &Stop) -> Result<()> {
    let restarts = engram_experiments::slurm_restarts().unwrap_or(0);
    if restarts >= max {
        eprintln!(
            "Slurm job {job}: not requeued: it was requeued {restarts} times already (--max-restarts {max}); submit the sweep again with a longer --time to go on from its checkpoints"
        );
        return Ok(());
    }
    let out = std::process::Command::new("scontrol")
        .args(["requeue", job])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            eprintln!(
                "Slurm job {job}: requeued (restart {} of at most {max}); it resumes from its checkpoint",
                restarts + 1
            );
            let t0 = Instant::now();
            while stop.requested() != Some(signals::TERMINATE) && t0.elapsed() < REQUEUE_WAIT {
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(())
        }
        Ok(o) => bail!(
            "Slurm job {job}: scontrol requeue failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => bail!("Slurm job {job}: cannot run scontrol requeue: {e}"),
    }
}
