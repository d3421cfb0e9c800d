//! `engram sweep` asked to stop (Ctrl-C, as a scheduler's SIGTERM or time-limit SIGUSR2 would):
//! the LoRA cell in training stops at its next step, writes no record (no `failed` one), frees
//! its claim and keeps its epoch checkpoint; the sweep exits with the signal's status, and a
//! rerun resumes the cell from that checkpoint to the record an uninterrupted run gives.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use engram_testkit::sweeps::{has_checkpoint, tiny_experiment};

const CELL: &str = "n8-lora-r4";

fn sweep(exp: &Path, results: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_engram"));
    c.arg("sweep")
        .arg(exp)
        .arg("--results")
        .arg(results)
        .args(["--only", CELL, "--no-progress"]);
    c
}

fn run_ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sweep failed:\n{err}");
    err
}

fn record(results: &Path) -> serde_json::Value {
    let p = results.join(format!("cells/{CELL}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn ctrl_c_stops_a_cell_at_a_step_and_the_rerun_resumes_it_to_the_same_record() {
    let dir = tempfile::tempdir().unwrap();
    let exp = tiny_experiment(dir.path());

    let a = dir.path().join("uninterrupted");
    run_ok(sweep(&exp, &a));

    let b = dir.path().join("interrupted");
    let mut child = sweep(&exp, &b)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let work = b.join(format!("work/{CELL}"));
    let t0 = Instant::now();
    while !has_checkpoint(&work.join("checkpoints")) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the sweep ended before it could be stopped"
        );
        assert!(t0.elapsed() < Duration::from_secs(600), "no checkpoint");
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(130), "{log}");
    assert!(
        log.contains(&format!("stopped by Ctrl-C (SIGINT) in {CELL}"))
            && log.contains("resumes from its newest epoch checkpoint"),
        "{log}"
    );
    assert!(
        !b.join(format!("cells/{CELL}.json")).exists(),
        "a stopped cell writes no record (and the cell had not finished): {log}"
    );
    assert!(
        !b.join(format!("locks/{CELL}.lock")).exists(),
        "its claim is freed"
    );
    let train: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("train_record.json")).unwrap())
            .unwrap();
    assert_eq!(train["status"], "stopped", "{train:#}");
    let kept = train["epochs"].as_array().unwrap().len();
    assert!((1..30).contains(&kept), "{train:#}");

    let mut c = sweep(&exp, &b);
    c.arg("--status");
    let status = String::from_utf8_lossy(&c.output().unwrap().stdout).into_owned();
    assert!(
        status.contains(&format!(
            "to do (stopped after epoch {kept} of 30; resumes from its checkpoint)"
        )),
        "{status}"
    );

    let log = run_ok(sweep(&exp, &b));
    assert!(log.contains("1 cells run"), "{log}");
    let (ra, rb) = (record(&a), record(&b));
    assert_eq!(
        rb["metrics"]["resumed_after_epoch"].as_u64(),
        Some(kept as u64),
        "{log}"
    );
    assert_eq!(rb["status"], "done");
    for key in ["questions", "accuracy", "config_hash"] {
        assert_eq!(ra[key], rb[key], "{key}");
    }
    assert_eq!(
        ra["metrics"]["final_loss"], rb["metrics"]["final_loss"],
        "the resumed run retraces the uninterrupted one's steps"
    );
}
