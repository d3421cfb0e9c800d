//! Several devices of one machine, without a scheduler: one worker per device — the engram
//! binary again, as `engram sweep … --device D` — and the cell claims split the cells between
//! them exactly as between sweeps on many machines (one cell per device at a time, none twice).
//! Each worker's log lines reach the progress reporter prefixed with its device; a stop
//! (Ctrl-C, SIGTERM) reaches every worker, each stops at its next step. Once all have ended,
//! the table is rendered once more from every record.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use anyhow::{Context, Result};
use engram_io::Progress;

use super::{DevicesReport, Executor, Job, Outcome};
use crate::experiment::Experiment;
use crate::render::render_dir;
use crate::status::{Status, status};

/// How often the workers are looked at.
const POLL: Duration = Duration::from_millis(100);

/// One worker process per device.
#[derive(Debug, Clone)]
pub struct Devices {
    /// The devices (`cuda:0`, `cpu`, …), each checked before anything starts.
    pub devices: Vec<String>,
    /// The engram binary the workers run.
    pub engram: PathBuf,
}

/// One worker: its label, its process and the thread relaying its log lines.
struct Worker {
    label: String,
    child: Child,
    relay: std::thread::JoinHandle<()>,
}

impl Devices {
    /// The command that runs a worker on `device`.
    fn worker_command(&self, exp: &Experiment, job: &Job, device: &str) -> Command {
        let mut c = Command::new(&self.engram);
        c.arg("sweep")
            .arg(&exp.path)
            .arg("--configs")
            .arg(&job.configs)
            .arg("--results")
            .arg(&job.results)
            .args(["--device", device, "--no-progress"]);
        if !job.only.is_empty() {
            c.arg("--only").arg(job.only.join(","));
        }
        c
    }

    /// Starts a worker per device; each line it logs is sent to `lines`, prefixed with its
    /// label (`0:cuda:0`).
    fn spawn(&self, exp: &Experiment, job: &Job, lines: &Sender<String>) -> Result<Vec<Worker>> {
        let mut workers = Vec::new();
        for (i, device) in self.devices.iter().enumerate() {
            let label = format!("{i}:{device}");
            let mut child = self
                .worker_command(exp, job, device)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .with_context(|| format!("starting the worker on {device}"))?;
            let err = child.stderr.take().expect("piped");
            let (prefix, lines) = (label.clone(), lines.clone());
            let relay = std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
                    let _ = lines.send(format!("[{prefix}] {line}"));
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
}

/// Passes `lines` received so far on to `progress`.
fn relay(lines: &Receiver<String>, progress: &dyn Progress) {
    for line in lines.try_iter() {
        progress.note(&line);
    }
}

/// Sends signal `sig` to `child`.
fn signal(child: &Child, sig: usize) {
    // SAFETY: kill(2) on the pid of a child this process spawned and still waits for.
    unsafe { libc::kill(child.id() as libc::pid_t, sig as libc::c_int) };
}

impl Executor for Devices {
    fn execute(&self, exp: &Experiment, job: &Job, progress: &dyn Progress) -> Result<Outcome> {
        for (i, d) in self.devices.iter().enumerate() {
            engram_model::device_from_name(d)
                .with_context(|| format!("--devices entry {i}: {d}"))?;
        }
        progress.note(&format!(
            "{}: {} workers ({}) sharing {}",
            exp.name,
            self.devices.len(),
            self.devices.join(", "),
            job.results.display()
        ));
        let (send, lines) = channel();
        let mut workers = self.spawn(exp, job, &send)?;
        drop(send);
        let mut forwarded = false;
        let mut exits = vec![None; workers.len()];
        while exits.iter().any(Option::is_none) {
            if let (Some(sig), false) = (job.stop.requested(), forwarded) {
                // A Ctrl-C from the terminal reaches the workers by itself; a signal sent to
                // this process alone is passed on.
                for w in &workers {
                    signal(&w.child, sig);
                }
                forwarded = true;
            }
            for (w, e) in workers.iter_mut().zip(exits.iter_mut()) {
                if e.is_none() {
                    *e = w.child.try_wait()?;
                }
            }
            relay(&lines, progress);
            std::thread::sleep(POLL);
        }
        let mut failed = Vec::new();
        for (w, e) in workers.into_iter().zip(exits) {
            let _ = w.relay.join();
            let code = e.and_then(|s| s.code());
            if code != Some(0) {
                failed.push((w.label, code));
            }
        }
        relay(&lines, progress);
        let rendered = render_dir(&job.results, None)
            .with_context(|| format!("rendering {}", job.results.display()))?;
        let cells = status(exp, &job.results, &job.only, &Default::default())?;
        let done = cells
            .iter()
            .filter(|(_, s)| matches!(s, Status::Done | Status::DoneUnhealthy(_)))
            .count();
        Ok(Outcome::OnDevices(DevicesReport {
            devices: self.devices.len(),
            done,
            cells: cells.len(),
            failed,
            stopped: job.stop.requested(),
            rendered,
        }))
    }
}
