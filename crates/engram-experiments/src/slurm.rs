//! `engram sweep --executor slurm`: one Slurm job array per resource class of a frozen
//! [`Manifest`], at most `--max-parallel` tasks of each at a time, and a job that renders the
//! table once the arrays have ended (`afterany`). On a GPU backend the cheapest cell of each
//! method leads (the kernel warm-up, `warm_up.rs`): a class holding leaders and other cells gets
//! an array for each (`mem-16GB-first`, `mem-16GB`), and the others start once the leaders of
//! their methods have ended, loading the kernels those compiled. Task `i` `exec`s `engram sweep … --manifest M
//! --cell-index i` (so engram, not a shell, receives the scheduler's signals) and runs its cell
//! under the cell's claim, like any sweep. The submitter prints the job ids and returns; state is
//! read from the records afterwards (`engram sweep --status`), never from Slurm's accounting.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::launch::Manifest;

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
    /// Start every cell at once on a GPU backend too, where by default the cheapest cell of
    /// each method runs first and fills the kernel cache, and the others start once those have
    /// ended and load what they compiled instead of each compiling it on an allocated GPU.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_kernel_warm_up: bool,
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
    /// The job arrays, in the order they are submitted: every class's warm-up leaders, then the
    /// rest of each class.
    pub arrays: Vec<ArrayJob>,
    /// The table job's script.
    pub table_script: PathBuf,
    /// The table job's id.
    pub table_job: Option<String>,
}

/// One job array of a launch: a run of contiguous cells of one resource class.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayJob {
    /// Its name: the class's (`mem-16GB`), with `-first` for the leaders of a class that has
    /// others too.
    pub name: String,
    /// Its class's index in [`Manifest::classes`].
    pub class: usize,
    /// Its first cell's index in [`Manifest::cells`].
    pub first: usize,
    /// Its number of cells.
    pub count: usize,
    /// Whether its cells lead the kernel warm-up (the others wait for them).
    pub leads: bool,
    /// Indices into [`Launch::arrays`] of the arrays it waits for (`afterany`): those holding
    /// the leaders of its cells' methods.
    pub after: Vec<usize>,
    /// Its script.
    pub script: PathBuf,
    /// Its job id, once submitted.
    pub job: Option<String>,
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

/// The arrays of `m`: per class, its warm-up leaders and its other cells as one array each
/// where it has both, else one array; the leaders' arrays first (each follower array waits for
/// those holding its methods' leaders). Scripts are named `<array>.sbatch` in `dir`.
pub fn plan_arrays(m: &Manifest, dir: &Path) -> Vec<ArrayJob> {
    let array = |class: usize, name: String, first: usize, count: usize, leads: bool| ArrayJob {
        script: dir.join(format!("{name}.sbatch")),
        name,
        class,
        first,
        count,
        leads,
        after: Vec::new(),
        job: None,
    };
    let mut leaders = Vec::new();
    let mut rest = Vec::new();
    for (i, c) in m.classes.iter().enumerate() {
        let others = c.count - c.leaders;
        match (c.leaders, others) {
            (0, _) => rest.push(array(i, c.name.clone(), c.first, c.count, false)),
            (_, 0) => leaders.push(array(i, c.name.clone(), c.first, c.count, true)),
            (l, n) => {
                leaders.push(array(i, format!("{}-first", c.name), c.first, l, true));
                rest.push(array(i, c.name.clone(), c.first + l, n, false));
            }
        }
    }
    let method_of = |cell: usize| m.cells[cell].cell.method;
    let n_leaders = leaders.len();
    for a in &mut rest {
        let methods: Vec<_> = (a.first..a.first + a.count).map(method_of).collect();
        a.after = (0..n_leaders)
            .filter(|&j| {
                let l = &leaders[j];
                (l.first..l.first + l.count).any(|c| methods.contains(&method_of(c)))
            })
            .collect();
    }
    leaders.extend(rest);
    leaders
}

/// The script of the array `a` of `m`.
pub fn array_script(
    m: &Manifest,
    manifest: &Path,
    a: &ArrayJob,
    o: &SlurmOptions,
    logs: &Path,
) -> String {
    let class = &m.classes[a.class];
    let name = m
        .experiment
        .file_stem()
        .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
    let last = a.first + a.count - 1;
    let throttle = o.max_parallel.map_or(String::new(), |n| format!("%{n}"));
    let time = match o.time.as_str() {
        AUTO_TIME => auto_time(class.seconds),
        given => given.to_string(),
    };
    let mut s = String::from("#!/bin/bash\n");
    let mut opt = |line: String| s.push_str(&format!("#SBATCH {line}\n"));
    opt(format!("--job-name=engram-{name}-{}", a.name));
    opt(format!("--array={}-{last}{throttle}", a.first));
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
    for arg in &o.sbatch_args {
        opt(arg.clone());
    }
    s.push_str(&format!(
        "# engram: {} cells of class {} (estimated at most {:.0} s and {:.1} GB each){}\nset -e\n",
        a.count,
        class.name,
        class.seconds,
        class.peak_bytes / 1e9,
        match (a.leads, a.after.is_empty()) {
            (true, _) => "; they lead the kernel warm-up: the cheapest cell of each method, run before the others",
            (false, false) => "; they start once the kernel warm-up's leaders have ended",
            (false, true) => "",
        }
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
/// `emit_only`): the warm-up leaders' arrays first, the others each after the leaders of its
/// methods (`afterany`: a leader that fails holds nothing up), the table after them all.
pub fn launch(m: &Manifest, o: &SlurmOptions) -> Result<Launch> {
    let dir = m.launch_dir()?;
    let manifest = m.write(&dir)?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| logs.display().to_string())?;
    let arrays = plan_arrays(m, &dir);
    for a in &arrays {
        let script = array_script(m, &manifest, a, o, &logs);
        engram_io::write_file(&a.script, script.as_bytes())?;
    }
    let table = dir.join("table.sbatch");
    engram_io::write_file(&table, table_script(m, o, &logs).as_bytes())?;
    let mut launch = Launch {
        dir,
        manifest,
        arrays,
        table_script: table.clone(),
        table_job: None,
    };
    if o.emit_only || m.cells.is_empty() {
        return Ok(launch);
    }
    for i in 0..launch.arrays.len() {
        let after: Vec<&str> = launch.arrays[i]
            .after
            .iter()
            .filter_map(|&j| launch.arrays[j].job.as_deref())
            .collect();
        let args = match after.is_empty() {
            true => vec![],
            false => vec![format!("--dependency=afterany:{}", after.join(":"))],
        };
        let id = sbatch(&launch.arrays[i].script, &args)?;
        launch.arrays[i].job = Some(id);
    }
    let after: Vec<&str> = launch
        .arrays
        .iter()
        .filter_map(|a| a.job.as_deref())
        .collect();
    launch.table_job = Some(sbatch(
        &table,
        &[format!("--dependency=afterany:{}", after.join(":"))],
    )?);
    Ok(launch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::ResourceClass;

    #[test]
    fn auto_time_has_its_margin_and_slurms_format() {
        assert_eq!(auto_time(0.0), "0-00:15:00");
        assert_eq!(auto_time(3600.0), "0-02:15:00");
        assert_eq!(auto_time(86_400.0), "2-00:15:00");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    /// A class of a test manifest: its name, its LoRA cells as (facts, rank), its leaders.
    type TestClass<'a> = (&'a str, &'a [(usize, usize)], usize);

    /// A manifest of `classes`.
    fn manifest(classes: &[TestClass]) -> Manifest {
        let mut m = Manifest {
            format: crate::launch::FORMAT,
            experiment: "e.toml".into(),
            configs: "c".into(),
            results: "r".into(),
            created_unix: 0,
            cells: Vec::new(),
            classes: Vec::new(),
            warm: Vec::new(),
        };
        for (name, cells, leaders) in classes {
            m.classes.push(ResourceClass {
                name: name.to_string(),
                first: m.cells.len(),
                count: cells.len(),
                seconds: 0.0,
                peak_bytes: 0.0,
                leaders: *leaders,
            });
            for &(facts, rank) in *cells {
                let cell = crate::cells::Cell::new(facts, crate::cells::Method::Lora { rank });
                m.cells.push(crate::launch::FrozenCell {
                    id: cell.id(),
                    cell,
                    hash: String::new(),
                });
            }
        }
        m
    }

    #[test]
    fn leaders_get_arrays_of_their_own_that_only_their_methods_wait_for() {
        // r8's leader and r64's leader share a class; r2048's leads alone in its own class, and
        // a class of r8 cells alone waits for r8's leader only.
        let m = manifest(&[
            ("mem-32GB", &[(10, 8), (10, 64), (100, 8), (100, 64)], 2),
            ("mem-64GB", &[(1000, 8)], 0),
            ("mem-128GB", &[(10, 2048)], 1),
        ]);
        let arrays = plan_arrays(&m, Path::new("/l"));
        let view: Vec<(&str, usize, usize, bool, Vec<usize>)> = arrays
            .iter()
            .map(|a| (a.name.as_str(), a.first, a.count, a.leads, a.after.clone()))
            .collect();
        assert_eq!(
            view,
            [
                ("mem-32GB-first", 0, 2, true, vec![]),
                ("mem-128GB", 5, 1, true, vec![]),
                ("mem-32GB", 2, 2, false, vec![0]),
                ("mem-64GB", 4, 1, false, vec![0]),
            ]
        );
        assert_eq!(arrays[0].script, Path::new("/l/mem-32GB-first.sbatch"));
        let o = SlurmOptions {
            partition: None,
            account: None,
            qos: None,
            time: "1:00:00".into(),
            gpus_per_cell: 1,
            max_parallel: Some(4),
            sbatch_args: vec![],
            setup: vec![],
            emit_only: true,
            no_kernel_warm_up: false,
            max_restarts: 3,
            engram: "/bin/engram".into(),
        };
        let script =
            |a: &ArrayJob| array_script(&m, Path::new("/l/m.json"), a, &o, Path::new("/l/logs"));
        let first = script(&arrays[0]);
        assert!(first.contains("#SBATCH --array=0-1%4\n"), "{first}");
        assert!(
            first.contains("--job-name=engram-e-mem-32GB-first"),
            "{first}"
        );
        assert!(first.contains("lead the kernel warm-up"), "{first}");
        let rest = script(&arrays[2]);
        assert!(rest.contains("#SBATCH --array=2-3%4\n"), "{rest}");
        assert!(
            rest.contains("once the kernel warm-up's leaders have ended"),
            "{rest}"
        );
        // Without leaders: one array per class, as before.
        let plain = manifest(&[("mem-32GB", &[(10, 8), (100, 8)], 0)]);
        let arrays = plan_arrays(&plain, Path::new("/l"));
        assert_eq!(arrays.len(), 1);
        assert_eq!((arrays[0].name.as_str(), arrays[0].count), ("mem-32GB", 2));
        assert!(arrays[0].after.is_empty() && !arrays[0].leads);
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
