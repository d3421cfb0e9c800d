//! Running a benchmark's child process to completion with its peak resident set size, so that
//! each run's memory is its own (`wait4`'s `ru_maxrss` on Unix).

use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Runs `cmd` to completion (stdout discarded, stderr kept for the error) and returns its peak
/// resident set in MB (NaN where the platform does not report it).
pub fn run_measured(mut cmd: Command, what: &str) -> Result<f64> {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let (ok, peak_mb) = wait(child, what)?;
    let err = reader.join().unwrap_or_default();
    if !ok {
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        bail!(
            "{what} failed: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(peak_mb)
}

#[cfg(unix)]
fn wait(child: std::process::Child, what: &str) -> Result<(bool, f64)> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own un-waited child; status and usage are valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if r < 0 {
        bail!("waiting for {what}: {}", std::io::Error::last_os_error());
    }
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok((ok, usage.ru_maxrss as f64 / 1024.0))
}

#[cfg(not(unix))]
fn wait(mut child: std::process::Child, what: &str) -> Result<(bool, f64)> {
    let status = child
        .wait()
        .with_context(|| format!("waiting for {what}"))?;
    Ok((status.success(), f64::NAN))
}

/// This process's peak resident set in MB (`getrusage`), where the platform reports it.
#[cfg(unix)]
pub fn own_peak_rss_mb() -> Option<f64> {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (r == 0).then(|| usage.ru_maxrss as f64 / 1024.0)
}

/// This process's peak resident set in MB, where the platform reports it.
#[cfg(not(unix))]
pub fn own_peak_rss_mb() -> Option<f64> {
    None
}
