//! `engram sweep --executor slurm` on a real Slurm (Debian's slurm-wlm as a single-node
//! cluster on localhost, started by `.ci/run` with `../shared/notes/slurm/up.sh`): the tiny
//! experiment's cells go through job arrays, every record appears, and the table equals a local
//! sweep's; a task requeued (`scontrol requeue`: SIGTERM) and then preempted (a job in the
//! higher-priority partition: SIGUSR2, and engram requeues itself) mid-training resumes from its
//! epoch checkpoint each time and ends with the record of an uninterrupted run. Skipped, with a message, where `sbatch` is absent or no cluster answers. The
//! manifest's checks (a changed experiment, an index out of range) and a missing `sbatch` need
//! no cluster and always run.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use engram_testkit::sweeps::{tiny_experiment, write};

fn engram() -> Command {
    Command::new(env!("CARGO_BIN_EXE_engram"))
}

fn ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{so}\n{se}");
    so
}

fn fails(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether no Slurm cluster answers here (said, for a test that is then skipped).
fn no_cluster() -> bool {
    let up = Command::new("sinfo")
        .args(["-h", "-o", "%T"])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    if !up {
        eprintln!(
            "SKIPPED: no Slurm cluster answers `sinfo` here (CI starts one: ../shared/notes/slurm/up.sh)"
        );
    }
    !up
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn cells_run_as_job_arrays_and_give_the_local_table() {
    if no_cluster() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    // Two replicates of the LoRA cell (their own cells, ids `-rep1`) with memorization curves:
    // array tasks run them like any cell, and the table job's table is the local one.
    let text = read(&exp).replace("rag_k = 2\n", "rag_k = 2\nreplicates = 2\n");
    std::fs::write(&exp, text).unwrap();
    let quick = dir.path().join("configs/training/quick.toml");
    std::fs::write(&quick, read(&quick) + "eval_every = 10\neval_sample = 2\n").unwrap();
    let local = dir.path().join("local");
    ok(engram()
        .args(["sweep", "--no-progress", "--results"])
        .arg(&local)
        .arg(&exp));
    let r = dir.path().join("slurm");
    let out = ok(engram()
        .args([
            "sweep",
            "--executor",
            "slurm",
            "--max-parallel",
            "2",
            "--results",
        ])
        .arg(&r)
        .arg(&exp));
    assert!(
        out.contains("8 cells to run") && out.contains("table: job"),
        "{out}"
    );
    let t0 = Instant::now();
    while !r.join("table.md").exists()
        || std::fs::read_dir(r.join("cells")).map_or(0, |d| d.count()) < 8
        || !std::fs::read_dir(r.join("launch"))
            .unwrap()
            .flatten()
            .any(|d| {
                std::fs::read_dir(d.path().join("logs")).is_ok_and(|l| {
                    l.flatten()
                        .any(|f| f.file_name().to_string_lossy().starts_with("table-"))
                })
            })
    {
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "the Slurm sweep did not finish: {out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The table job ran after the arrays: wait for it to write the final table.
    let t1 = Instant::now();
    while read(&r.join("table.md")) != read(&local.join("table.md")) {
        assert!(
            t1.elapsed() < Duration::from_secs(120),
            "tables differ:\n{}\nvs\n{}",
            read(&r.join("table.md")),
            read(&local.join("table.md"))
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let status = ok(engram()
        .args(["sweep", "--status", "--results"])
        .arg(&r)
        .arg(&exp));
    assert!(status.contains("8 done, 0 running"), "{status}");
    // The replicate's record: its own seed's run, with its curve (epochs 10, 20, 30).
    let rep = read(&r.join("cells/n4-lora-r4-rep1.json"));
    let rec: serde_json::Value = serde_json::from_str(&rep).unwrap();
    assert_eq!(rec["cell"]["replicate"], 1, "{rep}");
    let curve = rec["metrics"]["curve"].as_array().cloned();
    assert_eq!(
        curve.map(|c| c.iter().map(|p| p[0].as_u64().unwrap()).collect::<Vec<_>>()),
        Some(vec![10, 20, 30]),
        "{rep}"
    );
    assert!(
        read(&r.join("table.md")).contains("×2"),
        "{}",
        read(&r.join("table.md"))
    );
}

/// On a GPU backend (wgpu: llvmpipe here, which compiles kernels as a GPU driver does) the
/// cheapest cell of each method leads: its array runs first on an empty kernel cache, and the
/// rest of the class waits for it (`afterany`), then loads what it compiled. With
/// `--no-kernel-warm-up` the scripts are one array per class, as on the CPU.
#[cfg(feature = "wgpu")]
#[test]
fn on_a_gpu_backend_the_kernel_warm_up_runs_first_and_the_rest_load_its_kernels() {
    if no_cluster() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_wgpu_lora_experiment(dir.path());
    let cache = dir.path().join("kernels");
    let plain = ok(engram()
        .args(["sweep", "--executor", "slurm", "--emit-only"])
        .args(["--no-kernel-warm-up", "--results"])
        .arg(dir.path().join("plain"))
        .arg(&exp));
    assert!(
        !plain.contains("kernel warm-up") && !plain.contains("-first"),
        "{plain}"
    );
    let r = dir.path().join("slurm");
    let out = ok(engram()
        .env("ENGRAM_KERNEL_CACHE", &cache)
        .args(["sweep", "--executor", "slurm", "--max-parallel", "2"])
        .arg("--results")
        .arg(&r)
        .arg(&exp));
    assert!(
        out.contains("kernel warm-up: 1 of the 2 cells")
            && out.contains("mem-1GB-first: 1 cells")
            && out.contains("mem-1GB: 1 cells"),
        "{out}"
    );
    let first = out
        .lines()
        .find(|l| l.contains("-first: "))
        .and_then(|l| l.rsplit("job ").next())
        .unwrap()
        .trim()
        .to_string();
    assert!(
        out.lines()
            .any(|l| l.contains("mem-1GB: ") && l.ends_with(&format!("after {first}"))),
        "{out}"
    );
    wait_for("both records and the table", 600, || {
        r.join("cells/n8-lora-r4.json").exists() && r.join("table.md").exists()
    });
    let (lead, follow) = assert_warmed_up(&r);
    eprintln!("kernels compiled: leader {lead}, follower {follow}");
    // Resumed without the follower's record: its method ran on this cache before, so the cell
    // starts at once, with no leader to wait for; a new cache directory is cold again.
    std::fs::remove_file(r.join("cells/n8-lora-r4.json")).unwrap();
    let resumed = |cache: &Path| {
        ok(engram()
            .env("ENGRAM_KERNEL_CACHE", cache)
            .args(["sweep", "--executor", "slurm", "--emit-only", "--results"])
            .arg(&r)
            .arg(&exp))
    };
    let warm = resumed(&cache);
    assert!(
        warm.contains("kernel warm-up: not needed for the methods of n4-lora-r4")
            && !warm.contains("-first")
            && warm.contains("mem-1GB: 1 cells"),
        "{warm}"
    );
    let cold = resumed(&dir.path().join("other-kernels"));
    assert!(
        cold.contains("kernel warm-up: 1 of the 1 cells") && !cold.contains("not needed"),
        "{cold}"
    );
}

/// [`tiny_experiment`] as a GPU sweep: on wgpu (llvmpipe without a GPU), its LoRA cells alone
/// (4 and 8 facts, rank 4) for 3 epochs — the kernel warm-up's smallest case, one leader
/// (`n4-lora-r4`) and one follower (`n8-lora-r4`).
#[cfg(feature = "wgpu")]
fn tiny_wgpu_lora_experiment(root: &Path) -> std::path::PathBuf {
    let exp = tiny_experiment(root);
    let text = read(&exp)
        .replace("judge = \"f1\"\n", "judge = \"f1\"\nbackend = \"wgpu\"\n")
        .replace("long_context = true", "long_context = false")
        .replace("rag = true", "rag = false");
    std::fs::write(&exp, text).unwrap();
    write(
        root,
        "configs/training/quick.toml",
        "epochs = 3\nlr = 2e-3\nbatch_size = 4\nwarmup_epochs = 0.0\ndecay = false\n",
    );
    exp
}

/// The kernel warm-up's effect in the records of [`tiny_wgpu_lora_experiment`] swept into
/// `results` on an empty kernel cache: the leader started first and compiled kernels, the
/// follower started once the leader had ended and loaded most of its kernels from the cache.
/// Returns (the leader's, the follower's) kernels compiled.
#[cfg(feature = "wgpu")]
fn assert_warmed_up(results: &Path) -> (u64, u64) {
    let record = |id: &str| {
        let p = results.join(format!("cells/{id}.json"));
        json(&p).unwrap_or_else(|| panic!("{}: no readable record", p.display()))
    };
    let (lead, follow) = (record("n4-lora-r4"), record("n8-lora-r4"));
    let n = |r: &serde_json::Value, key: &str| {
        r["kernels"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("no kernels.{key} in {r}"))
    };
    let started = |r: &serde_json::Value| {
        r["finished_unix"].as_f64().unwrap() - r["timings"]["total_s"].as_f64().unwrap()
    };
    assert!(
        started(&follow) >= lead["finished_unix"].as_f64().unwrap() - 1.0,
        "the follower started before its leader ended: {lead}\n{follow}"
    );
    let (cl, cf) = (n(&lead, "kernels_compiled"), n(&follow, "kernels_compiled"));
    assert!(cl > 0 && n(&lead, "autotune_decisions") > 0, "{lead}");
    assert!(
        cf * 4 < cl && n(&follow, "kernels_loaded") > cf,
        "the follower compiled {cf} kernels, its leader {cl}: {follow}"
    );
    (cl, cf)
}

#[test]
fn a_manifest_is_checked_against_the_experiment_and_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    let r = dir.path().join("r");
    let out = ok(engram()
        .args([
            "sweep",
            "--executor",
            "slurm",
            "--emit-only",
            "--setup",
            "module load x",
        ])
        .args(["--sbatch-arg=--mem=2G", "--results"])
        .arg(&r)
        .arg(&exp));
    assert!(out.contains("--emit-only: nothing submitted"), "{out}");
    let launch = std::fs::read_dir(r.join("launch"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let manifest = launch.join("manifest.json");
    let m: serde_json::Value = serde_json::from_str(&read(&manifest)).unwrap();
    assert_eq!(m["cells"].as_array().unwrap().len(), 6);
    // Each frozen cell carries its typed key beside its id.
    for c in m["cells"].as_array().unwrap() {
        let (id, cell) = (c["id"].as_str().unwrap(), &c["cell"]);
        let n = cell["facts"].as_u64().unwrap();
        assert!(id.starts_with(&format!("n{n}-")), "{id}: {cell}");
        assert!(cell["method"]["kind"].is_string(), "{id}: {cell}");
    }
    // A manifest of another format is refused by name.
    let old = launch.join("old.json");
    std::fs::write(
        &old,
        read(&manifest).replace("\"format\": 2", "\"format\": 1"),
    )
    .unwrap();
    let e = fails(
        engram()
            .args(["sweep", "--cell-index", "0", "--manifest"])
            .arg(&old)
            .arg(&exp),
    );
    assert!(
        e.contains("manifest format 1") && e.contains("submit"),
        "{e}"
    );
    let script = read(&launch.join(format!(
        "{}.sbatch",
        m["classes"][0]["name"].as_str().unwrap()
    )));
    for want in [
        "#SBATCH --array=0-",
        "#SBATCH --mem=2G",
        "module load x",
        "exec '",
        "--cell-index \"$SLURM_ARRAY_TASK_ID\"",
    ] {
        assert!(script.contains(want), "{want}:\n{script}");
    }
    // Out of range.
    let e = fails(
        engram()
            .args(["sweep", "--cell-index", "6", "--manifest"])
            .arg(&manifest)
            .arg(&exp),
    );
    assert!(
        e.contains("cell index 6 is out of range") && e.contains("6 cells"),
        "{e}"
    );
    // The experiment changed since submission.
    let text = read(&exp).replace("rag_k = 2", "rag_k = 3");
    std::fs::write(&exp, text).unwrap();
    let rag = m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c["id"].as_str().unwrap().ends_with("-rag"))
        .unwrap();
    let e = fails(
        engram()
            .args(["sweep", "--cell-index", &rag.to_string(), "--manifest"])
            .arg(&manifest)
            .arg(&exp),
    );
    assert!(e.contains("the experiment changed since submission"), "{e}");
    // No sbatch on PATH.
    let e = fails(
        engram()
            .args(["sweep", "--executor", "slurm", "--results"])
            .arg(&r)
            .arg(&exp)
            .env("PATH", dir.path()),
    );
    assert!(e.contains("needs `sbatch` on PATH"), "{e}");
}

/// Runs `c` (a Slurm client), asserting success; its stdout, trimmed.
fn slurm(c: &mut Command) -> String {
    ok(c).trim().to_string()
}

/// Waits (at most `secs`) for `done`, saying `what` if it never happens.
fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "{what}: not after {secs} s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a requeued job at once instead of after Slurm's fixed 120 s begin-time delay.
fn kick(job: &str) {
    wait_for(&format!("{job} pending after its requeue"), 120, || {
        let out = Command::new("squeue")
            .args(["-h", "-j", job, "-o", "%r"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "BeginTime"
    });
    slurm(Command::new("scontrol").args(["update", &format!("JobId={job}"), "StartTime=now"]));
}

fn json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

#[test]
fn a_requeued_and_then_preempted_task_resumes_to_the_uninterrupted_record() {
    if no_cluster() {
        return;
    }
    const CELL: &str = "n8-lora-r4";
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    // Long enough to be interrupted twice: 300 epochs of 8 steps.
    write(
        dir.path(),
        "configs/training/quick.toml",
        "epochs = 300\nlr = 2e-3\nbatch_size = 1\nwarmup_epochs = 0.0\ndecay = false\n",
    );
    let local = dir.path().join("local");
    ok(engram()
        .args(["sweep", "--no-progress", "--only", CELL, "--results"])
        .arg(&local)
        .arg(&exp));
    let r = dir.path().join("slurm");
    let out = ok(engram()
        .args(["sweep", "--executor", "slurm", "--partition", "debug"])
        .args(["--only", CELL, "--results"])
        .arg(&r)
        .arg(&exp));
    let job = out
        .lines()
        .find(|l| l.contains(".sbatch → job "))
        .and_then(|l| l.rsplit("job ").next())
        .unwrap_or_else(|| panic!("no array job in: {out}"))
        .trim()
        .to_string();
    let table_job = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("table: job "))
        .and_then(|l| l.split(',').next())
        .unwrap_or_else(|| panic!("no table job in: {out}"))
        .to_string();
    let task = format!("{job}_0");
    let work = r.join(format!("work/{CELL}"));
    let train = work.join("train_record.json");

    // 1. `scontrol requeue` after the first checkpoint: SIGTERM, the task stops at a step.
    wait_for("a first epoch checkpoint", 300, || {
        json(&train).is_some_and(|t| t["epochs"].as_array().is_some_and(|e| !e.is_empty()))
    });
    slurm(Command::new("scontrol").args(["requeue", &task]));
    kick(&task);
    // 2. Once the rerun is training from its checkpoint, a job in the `high` partition that
    // needs the whole node preempts it: SIGUSR2 at once, and engram requeues itself.
    wait_for("the requeued task training again", 300, || {
        json(&train).is_some_and(|t| t["status"] == "running" && t["resumed_after_epoch"].is_u64())
    });
    let high = slurm(Command::new("sbatch").args([
        "--parsable",
        "-p",
        "high",
        "-c",
        "2",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 2",
    ]));
    kick(&task);
    let record = r.join(format!("cells/{CELL}.json"));
    wait_for("the cell's record", 600, || record.exists());
    wait_for("the table job", 300, || {
        let q = Command::new("squeue")
            .args(["-h", "-j", &format!("{table_job},{high}")])
            .output()
            .unwrap();
        q.stdout.is_empty()
    });

    let log_path = std::fs::read_dir(r.join("launch"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join(format!("logs/{task}.out"));
    let log = read(&log_path);
    for want in [
        format!("stopped by SIGTERM in {CELL}"),
        format!("stopped by SIGUSR2 (the Slurm time limit's warning) in {CELL}"),
        format!("Slurm job {task}: requeued (restart 2 of at most 3)"),
    ] {
        assert!(log.contains(&want), "{want}:\n{log}");
    }
    let (a, b) = (
        json(&local.join(format!("cells/{CELL}.json"))).unwrap(),
        json(&record).unwrap(),
    );
    assert_eq!(b["status"], "done", "{log}");
    let resumed = b["metrics"]["resumed_after_epoch"].as_u64();
    assert!(
        resumed.is_some_and(|e| (2..300).contains(&e)),
        "resumed after {resumed:?}:\n{log}"
    );
    for key in ["questions", "accuracy", "config_hash"] {
        assert_eq!(a[key], b[key], "{key}");
    }
    assert_eq!(a["metrics"]["final_loss"], b["metrics"]["final_loss"]);
    assert!(!r.join(format!("locks/{CELL}.lock")).exists());
}
