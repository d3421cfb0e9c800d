//! `engram sweep` end to end on the tiny fixture model: a sweep killed (SIGKILL) in the middle
//! of a LoRA cell and run again gives the same table as an uninterrupted sweep, resumes the
//! interrupted cell from its checkpoint, and runs no finished cell again; two sweeps started at
//! once on one results directory run each cell once, a live claim is left alone and a dead
//! one taken over.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use engram_testkit::sweeps::{has_checkpoint, tiny_experiment, write};

/// The tiny experiment's cells, in table order.
const TINY_CELLS: [&str; 6] = [
    "n4-long-context",
    "n4-rag",
    "n4-lora-r4",
    "n8-long-context",
    "n8-rag",
    "n8-lora-r4",
];

fn repo() -> PathBuf {
    engram_testkit::repo()
}

fn sweep(exp: &Path, results: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_engram"));
    c.arg("sweep")
        .arg(exp)
        .arg("--results")
        .arg(results)
        .arg("--no-progress");
    c
}

fn run_ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sweep failed:\n{err}");
    err
}

/// Runs `c`, asserts success, returns its stdout.
fn stdout_ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_killed_sweep_resumes_to_the_same_table_without_rerunning_finished_cells() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());

    // Uninterrupted.
    let a = dir.path().join("results-a");
    run_ok(sweep(&exp, &a));
    let table_a = read(&a.join("table.md"));
    assert!(table_a.contains("| 8 |"), "{table_a}");

    // Killed in the middle of the last cell (n8-lora-r4), after its first epoch checkpoint.
    let b = dir.path().join("results-b");
    let mut child = sweep(&exp, &b)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ckpts = b.join("work/n8-lora-r4/checkpoints");
    let record = b.join("cells/n8-lora-r4.json");
    let t0 = Instant::now();
    while !has_checkpoint(&ckpts) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the sweep ended before it could be killed"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "no checkpoint appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !record.exists(),
        "the cell finished before the kill: not a mid-cell interruption"
    );
    let finished: Vec<(PathBuf, String)> = std::fs::read_dir(b.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let t = read(&p);
            (p, t)
        })
        .collect();
    assert_eq!(finished.len(), 5, "five cells were done before the kill");

    // Rerun: only the interrupted cell runs, resumed from its checkpoint.
    let log = run_ok(sweep(&exp, &b));
    assert!(log.contains("5 cells already done"), "{log}");
    for (p, before) in &finished {
        assert_eq!(&read(p), before, "{} was rewritten", p.display());
    }
    let rec: serde_json::Value = serde_json::from_str(&read(&record)).unwrap();
    let resumed = rec["metrics"]["resumed_after_epoch"].as_u64();
    assert!(resumed.is_some_and(|e| (1..30).contains(&e)), "{rec:#}");
    assert_eq!(read(&b.join("table.md")), table_a);
    assert_eq!(read(&b.join("per_fact.csv")), read(&a.join("per_fact.csv")));

    // A third run has nothing to do.
    let log = run_ok(sweep(&exp, &b));
    assert!(
        log.contains("6 cells already done") && log.contains("0 cells run"),
        "{log}"
    );

    // A corrupt record is reported and its cell runs again (and only it).
    std::fs::write(b.join("cells/n4-rag.json"), "{ not json").unwrap();
    let log = run_ok(sweep(&exp, &b));
    assert!(
        log.contains("n4-rag.json: corrupt cell record") && log.contains("1 cells run"),
        "{log}"
    );
    assert_eq!(read(&b.join("table.md")), table_a);

    // A record the file system will not read (here a directory in its place; on NFS an EIO or
    // ESTALE) is named and left alone: its content is unknown, so its cell does not run again
    // and nothing replaces it.
    let record = b.join("cells/n4-rag.json");
    let kept = read(&record);
    std::fs::remove_file(&record).unwrap();
    std::fs::create_dir(&record).unwrap();
    let log = run_ok(sweep(&exp, &b));
    assert!(
        log.contains("n4-rag.json") && log.contains("not run") && log.contains("0 cells run"),
        "{log}"
    );
    assert!(record.is_dir(), "left as it was");
    std::fs::remove_dir(&record).unwrap();
    std::fs::write(&record, kept).unwrap();

    // RAG's k changed, and only the 4-fact RAG cell run again: the 8-fact one is shown but
    // marked as made with the earlier configuration, in the table and its CSV.
    let text = read(&exp).replace("rag_k = 2", "rag_k = 3");
    std::fs::write(&exp, text).unwrap();
    let mut c = sweep(&exp, &b);
    c.args(["--only", "n4-rag"]);
    let log = run_ok(c);
    assert!(log.contains("1 cells run"), "{log}");
    let table = read(&b.join("table.md"));
    let marked: Vec<&str> = table.lines().filter(|l| l.contains('‡')).collect();
    assert!(
        marked.len() == 2 && marked[0].starts_with("| 8 |"),
        "only n8's RAG entry is marked: {table}"
    );
    assert!(
        table.contains("- n8-rag: made with another configuration than experiment tiny's"),
        "{table}"
    );
    let csv = read(&b.join("table.csv"));
    assert!(
        csv.lines()
            .filter(|l| l.contains("made with another configuration"))
            .eq(csv.lines().filter(|l| l.starts_with("8,RAG,"))),
        "{csv}"
    );
}

#[test]
fn dry_run_lists_cells_with_estimates_and_only_selects() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    let mut c = sweep(&exp, &dir.path().join("r"));
    c.args(["--dry-run", "--only", "n8-*"]);
    let text = stdout_ok(c);
    assert!(text.contains("3 cells"), "{text}");
    assert!(
        text.contains("n8-lora-r4") && text.contains("to run"),
        "{text}"
    );
    assert!(!text.contains("n4-"), "{text}");

    // The paper's grid: rank 2048 on Llama-3.1-8B needs ~86 GB of adapter state.
    let table5 = repo().join("experiments/enronqa-table5.toml");
    let mut c = sweep(&table5, &dir.path().join("t5"));
    c.args(["--dry-run", "--only", "n10-lora-r2048"])
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HOME", dir.path().join("hf"));
    let text = stdout_ok(c);
    assert!(
        text.contains("n10-lora-r2048") && text.contains("85.9 GB"),
        "{text}"
    );
}

#[test]
fn a_failed_cell_is_recorded_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    // Training examples longer than 8 tokens are refused: every LoRA cell fails.
    write(
        dir.path(),
        "configs/training/quick.toml",
        "epochs = 2\nmax_len = 8\n",
    );
    let r = dir.path().join("r");
    let out = sweep(&exp, &r).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("2 cells failed"), "{log}");
    let rec: serde_json::Value =
        serde_json::from_str(&read(&r.join("cells/n4-lora-r4.json"))).unwrap();
    assert_eq!(rec["status"], "failed");
    assert!(
        rec["error"].as_str().unwrap().contains("training into"),
        "{rec:#}"
    );
    // The other cells ran and the table shows the failures.
    let table = read(&r.join("table.md"));
    assert!(table.contains("failed"), "{table}");
    for id in ["n4-long-context", "n4-rag", "n8-long-context", "n8-rag"] {
        let rec: serde_json::Value =
            serde_json::from_str(&read(&r.join(format!("cells/{id}.json")))).unwrap();
        assert_eq!(rec["status"], "done", "{id}");
    }
    // A rerun tries the failed cells again, and only them.
    let out = sweep(&exp, &r).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("n4-lora-r4: failed before") && log.contains("4 cells already done"),
        "{log}"
    );
}

#[test]
fn two_sweeps_at_once_run_each_cell_once_and_log_without_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    let r = dir.path().join("shared");
    // Both without --no-progress: their stderr is a pipe, not a terminal, so they log lines.
    let spawn = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_engram"));
        c.arg("sweep").arg(&exp).arg("--results").arg(&r);
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let logs: Vec<String> = [a, b]
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let log = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{log}");
            log
        })
        .collect();
    let all = logs.join("\n");
    for id in TINY_CELLS {
        assert_eq!(
            all.matches(&format!("{id}: started")).count(),
            1,
            "{id} ran once:\n{all}"
        );
        assert!(r.join(format!("cells/{id}.json")).exists(), "{id}");
    }
    // Plain progress lines: epochs and each cell's outcome.
    assert!(all.contains("epoch") && all.contains("accuracy"), "{all}");
    // No claim is left, and the status says so.
    assert_eq!(std::fs::read_dir(r.join("locks")).unwrap().count(), 0);
    let mut c = sweep(&exp, &r);
    c.arg("--status");
    let status = stdout_ok(c);
    assert!(status.contains("6 done, 0 running"), "{status}");

    // A live claim on a cell to do is shown and left alone; a dead one is taken over.
    std::fs::remove_file(r.join("cells/n4-rag.json")).unwrap();
    let lock = r.join("locks/n4-rag.lock");
    let holder = |host: &str, pid: u32| {
        format!(
            r#"{{"host": "{host}", "pid": {pid}, "job": "77_3", "since_unix": 0, "token": "t{pid}"}}"#
        )
    };
    std::fs::write(&lock, holder("node07", 4242)).unwrap();
    let mut c = sweep(&exp, &r);
    c.arg("--status");
    let status = stdout_ok(c);
    assert!(
        status.contains("n4-rag") && status.contains("running on host node07, pid 4242, job 77_3"),
        "{status}"
    );
    let log = run_ok(sweep(&exp, &r));
    assert!(
        log.contains("n4-rag: being run by host node07") && log.contains("0 cells run"),
        "{log}"
    );
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let here = engram_io::hostname();
    std::fs::write(&lock, holder(&here, pid)).unwrap();
    let log = run_ok(sweep(&exp, &r));
    assert!(
        log.contains("n4-rag: started") && log.contains("1 cells run"),
        "{log}"
    );
    assert!(!lock.exists());
}

/// `exp` swept locally into `dir/local` and with `--devices cpu,cpu` into `dir/devices`, both
/// succeeding: the two directories, the device sweep's log and its stdout (the table).
fn local_and_on_two_devices(exp: &Path, dir: &Path) -> (PathBuf, PathBuf, String, String) {
    let local = dir.join("local");
    run_ok(sweep(exp, &local));
    let r = dir.join("devices");
    let mut c = sweep(exp, &r);
    c.args(["--devices", "cpu,cpu"]);
    let out = c.output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    (local, r, log, table)
}

#[test]
fn devices_run_a_worker_each_and_every_cell_once_to_the_local_table() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    let (local, r, log, table) = local_and_on_two_devices(&exp, dir.path());
    assert!(table.contains("| 8 |"), "the table is printed: {table}");
    assert!(log.contains("2 workers (cpu, cpu)"), "{log}");
    for id in TINY_CELLS {
        let ran: Vec<&str> = log
            .lines()
            .filter(|l| l.ends_with(&format!("] {id}: started")))
            .collect();
        assert_eq!(ran.len(), 1, "{id} ran once:\n{log}");
    }
    for w in ["[0:cpu]", "[1:cpu]"] {
        assert!(
            log.lines()
                .any(|l| l.starts_with(w) && l.ends_with(": started")),
            "worker {w} ran a cell:\n{log}"
        );
    }
    assert!(log.contains("6 of 6 cells done on 2 devices"), "{log}");
    assert_eq!(read(&r.join("table.md")), read(&local.join("table.md")));
    assert_eq!(std::fs::read_dir(r.join("locks")).unwrap().count(), 0);

    // A device this build cannot open is named before anything runs.
    let mut c = sweep(&exp, &dir.path().join("bad"));
    c.args(["--devices", "cpu,tpu:0"]);
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--devices entry 1: tpu:0"),
        "{err}"
    );
}

#[test]
fn replicates_with_resampled_facts_spread_over_devices_to_the_local_table() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    let text = read(&exp).replace(
        "rag_k = 2\n",
        "rag_k = 2\nreplicates = 2\nresample_facts = true\n",
    );
    std::fs::write(&exp, text).unwrap();
    let dry = stdout_ok({
        let mut c = sweep(&exp, &dir.path().join("dry"));
        c.arg("--dry-run");
        c
    });
    assert!(dry.contains("n8-long-context-rep1"), "{dry}");
    let (local, r, log, _) = local_and_on_two_devices(&exp, dir.path());
    // Every method twice per size: 2 sizes × 3 methods × 2 replicates.
    assert!(log.contains("12 of 12 cells done on 2 devices"), "{log}");
    let table = read(&r.join("table.md"));
    assert_eq!(table, read(&local.join("table.md")));
    assert!(table.contains("Facts resampled per replicate"), "{table}");
    assert!(table.contains(" ×2"), "{table}");
    // Replicate 1 answered a sample of its own, which its RAG and LoRA cells share.
    let ids = |id: &str| -> Vec<String> {
        let rec: serde_json::Value =
            serde_json::from_str(&read(&r.join("cells").join(format!("{id}.json")))).unwrap();
        let mut ids: Vec<String> = rec["questions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_ne!(ids("n4-rag"), ids("n4-rag-rep1"));
    assert_eq!(ids("n4-rag-rep1"), ids("n4-lora-r4-rep1"));
    assert_eq!(ids("n4-rag"), ids("n4-lora-r4"));
}

#[test]
fn export_gguf_writes_each_lora_cells_adapter_for_llama_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());
    let text = read(&exp).replace(
        "[answer]",
        "[export]\ngguf = true\ngguf_dtype = \"f32\"\n\n[answer]",
    );
    std::fs::write(&exp, &text).unwrap();
    let r = dir.path().join("r");
    let log = run_ok(sweep(&exp, &r));
    for id in ["n4-lora-r4", "n8-lora-r4"] {
        let gguf = r.join("adapters").join(format!("{id}.gguf"));
        assert!(log.contains(&format!("{id}: adapter exported")), "{log}");
        let f = engram_checkpoint::gguf::GgufFile::open(&gguf).unwrap();
        assert_eq!(f.meta("general.type").unwrap().as_str(), Some("adapter"));
        assert_eq!(f.tensors["blk.0.attn_q.weight.lora_a"].type_id, 0, "f32");
    }
    // Records do not depend on it: the sweep without [export] finds every cell done.
    std::fs::write(
        &exp,
        text.replace("[export]\ngguf = true\ngguf_dtype = \"f32\"\n\n", ""),
    )
    .unwrap();
    let log = run_ok(sweep(&exp, &r));
    assert!(log.contains("0 cells run, 6 already done"), "{log}");
    // An unknown float type is named.
    std::fs::write(&exp, text.replace("\"f32\"", "\"q4\"")).unwrap();
    let out = sweep(&exp, &r).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("export.gguf_dtype = \"q4\""),
        "{err}"
    );
}
