//! `engram sweep --executor slurm`: one Slurm job array per resource class of a frozen
//! [`Manifest`], at most `--max-parallel` tasks of each at a time, and a job that renders the
//! table once the arrays have ended (`afterany`). Task `i` `exec`s `engram sweep … --manifest M
//! --cell-index i` (so engram, not a shell, receives the scheduler's signals) and runs its cell
//! under the cell's claim, like any sweep. The submitter prints the job ids and returns; state is
//! read from the records afterwards (`engram sweep --status`), never from Slurm's accounting.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::launch::{Manifest, ResourceClass};

/// Margin on the estimated time for `--time auto`: twice the estimate plus 15 minutes.
pub const TIME_FACTOR: f64 = 2.0;
/// Added to every `--time auto` request (seconds).
pub const TIME_EXTRA_S: f64 = 900.0;
/// How long before its time limit a task is warned (`--signal=B:USR2@…`, seconds): enough to
/// finish a training step or an answer batch and requeue. Halved until it fits in a quarter of
/// a short limit.
pub const TIME_LIMIT_WARNING_S: u64 = 180;
/// How often a task stopped by its time limit requeues itself before it gives up, by default.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// `--time auto`: each class's limit from its estimate ([`auto_time`]).
pub const AUTO_TIME: &str = "auto";

/// How to submit (the sweep's Slurm flags, with the `clap` feature).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SlurmOptions {
    /// Slurm partition.
    #[cfg_attr(feature = "clap", arg(long))]
    pub partition: Option<String>,
    /// Slurm account.
    #[cfg_attr(feature = "clap", arg(long))]
    pub account: Option<String>,
    /// Slurm QOS.
    #[cfg_attr(feature = "clap", arg(long))]
    pub qos: Option<String>,
    /// Time limit of each Slurm task: `auto` (the dry-run's estimate of its class × 2 + 15 min)
    /// or as Slurm reads it (D-HH:MM, HH:MM:SS).
    #[cfg_attr(feature = "clap", arg(long, default_value = AUTO_TIME))]
    pub time: String,
    /// GPUs each cell asks Slurm for (`--gres=gpu:N`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub gpus_per_cell: u32,
    /// Tasks of one job array running at once.
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_parallel: Option<usize>,
    /// A further #SBATCH argument (repeatable), e.g. --sbatch-arg=--mem=32G.
    #[cfg_attr(feature = "clap", arg(long = "sbatch-arg", allow_hyphen_values = true))]
    pub sbatch_args: Vec<String>,
    /// A shell line each Slurm task runs before engram (repeatable): module loads, environment.
    #[cfg_attr(feature = "clap", arg(long))]
    pub setup: Vec<String>,
    /// Write the manifest and the Slurm scripts, submit nothing.
    #[cfg_attr(feature = "clap", arg(long))]
    pub emit_only: bool,
    /// How often a Slurm task stopped by its time limit (SIGUSR2) requeues itself to resume
    /// from its checkpoint (counted by SLURM_RESTART_COUNT) before it gives up.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_MAX_RESTARTS))]
    pub max_restarts: u32,
    /// The engram binary the tasks run (this one, normally; it must be visible from the
    /// compute nodes). Not a flag: the caller sets it.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub engram: PathBuf,
}

/// What was written and submitted.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The launch directory.
    pub dir: PathBuf,
    /// The manifest.
    pub manifest: PathBuf,
    /// One script per class, then the table job's.
    pub scripts: Vec<PathBuf>,
    /// `(class, job id)` per submitted array.
    pub arrays: Vec<(String, String)>,
    /// The table job's id.
    pub table_job: Option<String>,
}

/// Slurm's `D-HH:MM:SS` for `seconds` with the `--time auto` margin.
pub fn auto_time(seconds: f64) -> String {
    let s = (seconds * TIME_FACTOR + TIME_EXTRA_S).ceil() as u64;
    format!(
        "{}-{:02}:{:02}:{:02}",
        s / 86_400,
        s % 86_400 / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// Seconds in a Slurm time limit (`M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`); `None` for
/// what this cannot read (`UNLIMITED`, …).
pub fn slurm_seconds(t: &str) -> Option<u64> {
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, Some(r)),
        None => (0, None),
    };
    let parts: Vec<u64> = rest
        .unwrap_or(t)
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let (h, m, sec) = match (rest.is_some(), parts.as_slice()) {
        (false, [m]) => (0, *m, 0),
        (false, [m, s]) => (0, *m, *s),
        (_, [h, m, s]) => (*h, *m, *s),
        (true, [h]) => (*h, 0, 0),
        (true, [h, m]) => (*h, *m, 0),
        _ => return None,
    };
    Some(((days * 24 + h) * 60 + m) * 60 + sec)
}

/// The `--signal` warning for a time limit of `limit` seconds (unknown: the default).
pub fn warning_seconds(limit: Option<u64>) -> u64 {
    let mut w = TIME_LIMIT_WARNING_S;
    while let Some(l) = limit
        && w > 1
        && w * 4 > l
    {
        w /= 2;
    }
    w
}

/// Single-quotes `s` for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn path_arg(p: &Path) -> String {
    quote(&p.display().to_string())
}

/// `--partition`, `--account` and `--qos`, as given.
fn placement(o: &SlurmOptions) -> Vec<String> {
    [
        ("partition", &o.partition),
        ("account", &o.account),
        ("qos", &o.qos),
    ]
    .into_iter()
    .filter_map(|(flag, v)| v.as_ref().map(|v| format!("--{flag}={v}")))
    .collect()
}

/// The `--setup` lines, one per line.
fn setup(o: &SlurmOptions) -> String {
    o.setup.iter().map(|l| format!("{l}\n")).collect()
}

/// The array script of one class.
pub fn array_script(
    m: &Manifest,
    manifest: &Path,
    class: &ResourceClass,
    o: &SlurmOptions,
    logs: &Path,
) -> String {
    let name = m
        .experiment
        .file_stem()
        .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
    let last = class.first + class.count - 1;
    let throttle = o.max_parallel.map_or(String::new(), |n| format!("%{n}"));
    let time = match o.time.as_str() {
        AUTO_TIME => auto_time(class.seconds),
        given => given.to_string(),
    };
    let mut s = String::from("#!/bin/bash\n");
    let mut opt = |line: String| s.push_str(&format!("#SBATCH {line}\n"));
    opt(format!("--job-name=engram-{name}-{}", class.name));
    opt(format!("--array={}-{last}{throttle}", class.first));
    opt(format!("--time={time}"));
    opt(format!("--output={}/%A_%a.out", logs.display()));
    opt("--open-mode=append".into());
    // Preemption and time limits: requeueable, and warned (the batch process alone, which is
    // engram itself: `exec` below) so that it stops at a step boundary and requeues itself.
    opt("--requeue".into());
    opt(format!(
        "--signal=B:USR2@{}",
        warning_seconds(slurm_seconds(&time))
    ));
    for line in placement(o) {
        opt(line);
    }
    if o.gpus_per_cell > 0 {
        opt(format!("--gres=gpu:{}", o.gpus_per_cell));
    }
    for a in &o.sbatch_args {
        opt(a.clone());
    }
    s.push_str(&format!(
        "# engram: {} cells of class {} (estimated at most {:.0} s and {:.1} GB each)\nset -e\n",
        class.count,
        class.name,
        class.seconds,
        class.peak_bytes / 1e9
    ));
    s.push_str(&setup(o));
    s.push_str(&format!(
        "exec {} sweep {} --configs {} --results {} --manifest {} --cell-index \"$SLURM_ARRAY_TASK_ID\" --max-restarts {} --no-progress\n",
        path_arg(&o.engram),
        path_arg(&m.experiment),
        path_arg(&m.configs),
        path_arg(&m.results),
        path_arg(manifest),
        o.max_restarts
    ));
    s
}

/// The script of the job that renders the table.
fn table_script(m: &Manifest, o: &SlurmOptions, logs: &Path) -> String {
    let mut s = String::from("#!/bin/bash\n");
    s.push_str("#SBATCH --job-name=engram-table\n#SBATCH --time=0-00:30:00\n");
    s.push_str(&format!(
        "#SBATCH --output={}/table-%j.out\n",
        logs.display()
    ));
    for line in placement(o) {
        s.push_str(&format!("#SBATCH {line}\n"));
    }
    s.push_str("set -e\n");
    s.push_str(&setup(o));
    s.push_str(&format!(
        "exec {} table {}\n",
        path_arg(&o.engram),
        path_arg(&m.results)
    ));
    s
}

/// `sbatch --parsable [args] script` → the job id.
fn sbatch(script: &Path, args: &[String]) -> Result<String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .arg(script)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "--executor slurm needs `sbatch` on PATH, and there is none (is this a Slurm login node?)"
            )
        }
        Err(e) => return Err(e).context("running sbatch"),
    };
    if !out.status.success() {
        bail!(
            "sbatch rejected {}: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // `--parsable` prints `jobid[;cluster]`.
    let id = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    if id.is_empty() {
        bail!("sbatch printed no job id for {}", script.display());
    }
    Ok(id)
}

/// Writes the manifest and scripts of `m` into a new launch directory and submits them (unless
/// `emit_only`).
pub fn launch(m: &Manifest, o: &SlurmOptions) -> Result<Launch> {
    let dir = m.launch_dir()?;
    let manifest = m.write(&dir)?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| logs.display().to_string())?;
    let mut scripts = Vec::new();
    for class in &m.classes {
        let path = dir.join(format!("{}.sbatch", class.name));
        engram_io::write_file(
            &path,
            array_script(m, &manifest, class, o, &logs).as_bytes(),
        )?;
        scripts.push(path);
    }
    let table = dir.join("table.sbatch");
    engram_io::write_file(&table, table_script(m, o, &logs).as_bytes())?;
    scripts.push(table.clone());
    let mut launch = Launch {
        dir,
        manifest,
        scripts,
        arrays: Vec::new(),
        table_job: None,
    };
    if o.emit_only || m.cells.is_empty() {
        return Ok(launch);
    }
    for (class, script) in m.classes.iter().zip(&launch.scripts) {
        let id = sbatch(script, &[])?;
        launch.arrays.push((class.name.clone(), id));
    }
    let after: Vec<&str> = launch.arrays.iter().map(|(_, id)| id.as_str()).collect();
    launch.table_job = Some(sbatch(
        &table,
        &[format!("--dependency=afterany:{}", after.join(":"))],
    )?);
    Ok(launch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_time_has_its_margin_and_slurms_format() {
        assert_eq!(auto_time(0.0), "0-00:15:00");
        assert_eq!(auto_time(3600.0), "0-02:15:00");
        assert_eq!(auto_time(86_400.0), "2-00:15:00");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn slurm_time_limits_are_read_and_warned_within_them() {
        assert_eq!(slurm_seconds("0-00:15:00"), Some(900));
        assert_eq!(slurm_seconds("90"), Some(5400));
        assert_eq!(slurm_seconds("5:30"), Some(330));
        assert_eq!(slurm_seconds("01:00:00"), Some(3600));
        assert_eq!(slurm_seconds("2-3"), Some(2 * 86_400 + 3 * 3600));
        assert_eq!(slurm_seconds("1-00:01"), Some(86_460));
        assert_eq!(slurm_seconds("UNLIMITED"), None);
        assert_eq!(warning_seconds(Some(900)), 180);
        assert_eq!(warning_seconds(None), 180);
        assert_eq!(warning_seconds(Some(300)), 45);
        assert_eq!(warning_seconds(Some(2)), 1);
    }
}
