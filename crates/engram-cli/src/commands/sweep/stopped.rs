//! A sweep that was asked to stop: what is kept, and for a Slurm task stopped by its time
//! limit's warning (or a preemption's), requeueing itself.

use anyhow::Result;
use engram_experiments::{Requeue, Stopped};
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
        (Some(job), signals::TIME_LIMIT) => requeue(job, a.slurm.max_restarts, stop)?,
        (Some(job), _) => eprintln!(
            "Slurm job {job}: not requeued by engram (a preemption that requeues, or scontrol requeue, runs it again; after scancel, submit again)"
        ),
        (None, _) => eprintln!("run the same command again to go on"),
    }
    Err(ExitStatus(signals::exit_status(st.signal)).into())
}

/// Requeues a task stopped by its time limit ([`engram_experiments::requeue_self`]) and says so.
fn requeue(job: &str, max: u32, stop: &Stop) -> Result<()> {
    match engram_experiments::requeue_self(job, max, stop).map_err(anyhow::Error::msg)? {
        Requeue::Exhausted(n) => eprintln!(
            "Slurm job {job}: not requeued: it was requeued {n} times already (--max-restarts {max}); submit the sweep again with a longer --time to go on from its checkpoints"
        ),
        Requeue::Requeued(n) => eprintln!(
            "Slurm job {job}: requeued (restart {n} of at most {max}); it resumes from its checkpoint"
        ),
    }
    Ok(())
}
