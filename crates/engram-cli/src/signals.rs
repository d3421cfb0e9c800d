//! Signals into a stop request ([`engram_io::Stop`]) for the commands that run long work
//! (`sweep`, `train`): Ctrl-C (SIGINT), a scheduler's preemption or `scancel` (SIGTERM) and a
//! Slurm time limit's warning (SIGUSR2, asked for by the generated scripts) each make the work
//! end at its next safe point with everything finished kept. A second Ctrl-C ends the process
//! at once (exit status 130), for a user who does not want to wait for the step.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use engram_io::Stop;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR2};

/// Slurm's time-limit warning, as `--signal=B:USR2@…` sends it.
pub const TIME_LIMIT: usize = SIGUSR2 as usize;
/// A scheduler's (or `kill`'s) request to end.
pub const TERMINATE: usize = SIGTERM as usize;
/// Ctrl-C.
pub const INTERRUPT: usize = SIGINT as usize;

/// Installs the handlers; the returned handle is set by the first of those signals.
pub fn install() -> Result<Stop> {
    let stop = Stop::new();
    let armed = Arc::new(AtomicBool::new(false));
    // Registered before the flag that arms it, so that the first Ctrl-C only arms it.
    signal_hook::flag::register_conditional_shutdown(SIGINT, 130, armed.clone())
        .context("installing the Ctrl-C handler")?;
    signal_hook::flag::register(SIGINT, armed).context("installing the Ctrl-C handler")?;
    for sig in [SIGINT, SIGTERM, SIGUSR2] {
        signal_hook::flag::register_usize(sig, stop.flag(), sig as usize)
            .with_context(|| format!("installing the handler of signal {sig}"))?;
    }
    Ok(stop)
}

/// The signal's name as people know it.
pub fn name(signal: usize) -> &'static str {
    match signal {
        INTERRUPT => "Ctrl-C (SIGINT)",
        TERMINATE => "SIGTERM",
        TIME_LIMIT => "SIGUSR2 (the Slurm time limit's warning)",
        _ => "a stop request",
    }
}

/// The exit status of a process ended by `signal`, by the shell's convention (128 + signal).
pub fn exit_status(signal: usize) -> i32 {
    128 + signal as i32
}

/// An error that ends the process with this status (after its message), instead of 1.
#[derive(Debug)]
pub struct ExitStatus(pub i32);

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for ExitStatus {}
