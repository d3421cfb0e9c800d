//! The binary's error line: the file named, each cause once.

mod common;

use common::{engram, run};

#[test]
fn a_missing_fact_file_is_named_with_its_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-facts.jsonl");
    let (ok, _, stderr) = run(engram()
        .args(["train", "--facts"])
        .arg(&missing)
        .arg("--out")
        .arg(dir.path().join("out")));
    assert!(!ok, "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line in {stderr}"));
    assert!(line.contains("no-such-facts.jsonl"), "{line}");
    assert_eq!(line.matches("os error 2").count(), 1, "{line}");
}

#[test]
fn a_judge_flag_that_the_preset_would_override_is_named_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let preset = engram_testkit::repo().join("configs/judges/gold-recall.toml");
    for flag in [
        ["--base-url", "http://localhost:9/v1"],
        ["--judge-model", "m"],
        ["--concurrency", "2"],
        ["--f1-threshold", "0.7"],
    ] {
        let (ok, _, stderr) = run(engram()
            .args(["judge", "--answers", "a.jsonl", "--preset"])
            .arg(&preset)
            .args(flag)
            .arg("--out")
            .arg(dir.path().join("v.jsonl")));
        assert!(!ok, "{stderr}");
        assert!(
            stderr.contains("--preset") && stderr.contains(flag[0]),
            "{flag:?}: {stderr}"
        );
    }
}
