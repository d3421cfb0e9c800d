//! `engram sweep --devices cuda:0,cuda:1,…`: several devices of one machine, without a
//! scheduler. One worker per device — this binary again, as `engram sweep … --device D` — and
//! the cell claims split the cells between them exactly as between sweeps on many machines
//! (one cell per device at a time, none twice). Each worker's log lines come through prefixed
//! with its device; a stop (Ctrl-C, SIGTERM) reaches every worker, each stops at its next step.
//! Once all have ended, the table is rendered once more from every record and printed.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use engram_experiments::render::render_dir;
use engram_experiments::status::{Status, status};

use super::SweepArgs;
use crate::signals::{self, ExitStatus};

/// One worker: its label, its process and the thread relaying its log lines.
struct Worker {
    label: String,
    child: Child,
    relay: std::thread::JoinHandle<()>,
}

/// The command that runs a worker on `device`.
fn worker_command(a: &SweepArgs, configs: &Path, results: &Path, device: &str) -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| "engram".into());
    let mut c = Command::new(exe);
    c.arg("sweep")
        .arg(&a.experiment)
        .arg("--configs")
        .arg(configs)
        .arg("--results")
        .arg(results)
        .args(["--device", device, "--no-progress"]);
    if !a.only.is_empty() {
        c.arg("--only").arg(a.only.join(","));
    }
    c
}

/// Starts a worker per device; `label` prefixes its lines.
fn spawn(a: &SweepArgs, configs: &Path, results: &Path, devices: &[String]) -> Result<Vec<Worker>> {
    let mut workers = Vec::new();
    for (i, device) in devices.iter().enumerate() {
        let label = format!("{i}:{device}");
        let mut child = worker_command(a, configs, results, device)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting the worker on {device}"))?;
        let err = child.stderr.take().expect("piped");
        let prefix = label.clone();
        let relay = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
                eprintln!("[{prefix}] {line}");
            }
        });
        workers.push(Worker {
            label,
            child,
            relay,
        });
    }
    Ok(workers)
}

/// Runs the sweep on `devices` (see the module docs).
pub fn run_on_devices(
    a: &SweepArgs,
    exp: &engram_experiments::Experiment,
    configs: &Path,
    results: &Path,
    devices: &[String],
    stop: &engram_io::Stop,
) -> Result<()> {
    for (i, d) in devices.iter().enumerate() {
        engram_model::device_from_name(d).with_context(|| format!("--devices entry {i}: {d}"))?;
    }
    eprintln!(
        "{}: {} workers ({}) sharing {}",
        exp.name,
        devices.len(),
        devices.join(", "),
        results.display()
    );
    let mut workers = spawn(a, configs, results, devices)?;
    let mut forwarded = false;
    let mut exits = vec![None; workers.len()];
    while exits.iter().any(Option::is_none) {
        if let (Some(sig), false) = (stop.requested(), forwarded) {
            // A Ctrl-C from the terminal reaches the workers by itself; a signal sent to this
            // process alone is passed on.
            for w in &workers {
                // SAFETY: kill(2) on the pid of a child this process spawned and still waits
                // for.
                unsafe { libc::kill(w.child.id() as libc::pid_t, sig as libc::c_int) };
            }
            forwarded = true;
        }
        for (w, e) in workers.iter_mut().zip(exits.iter_mut()) {
            if e.is_none() {
                *e = w.child.try_wait()?;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut failed = Vec::new();
    for (w, e) in workers.into_iter().zip(exits) {
        let _ = w.relay.join();
        let code = e.and_then(|s| s.code());
        if code != Some(0) {
            failed.push((w.label, code));
        }
    }
    let rendered =
        render_dir(results, None).with_context(|| format!("rendering {}", results.display()))?;
    let cells = status(exp, results, &a.only, &Default::default())?;
    let done = cells
        .iter()
        .filter(|(_, s)| matches!(s, Status::Done | Status::DoneUnhealthy(_)))
        .count();
    if let Some(sig) = stop.requested() {
        eprintln!(
            "stopped by {}: {} cells done, the rest resume when you run the same command again",
            signals::name(sig),
            done
        );
        return Err(ExitStatus(signals::exit_status(sig)).into());
    }
    println!("{}", rendered.markdown);
    eprintln!(
        "{} of {} cells done on {} devices; table, plot and per-fact view in {}",
        done,
        cells.len(),
        devices.len(),
        results.display()
    );
    if !failed.is_empty() {
        let which: Vec<String> = failed
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
