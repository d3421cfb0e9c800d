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

#[test]
fn a_rank_the_machine_cannot_hold_is_refused_before_the_model_loads() {
    refused_before_loading("cpu");
}

/// On wgpu, the planner's figure against the Vulkan adapter's memory (llvmpipe's, here).
#[cfg(feature = "wgpu")]
#[test]
fn a_rank_the_wgpu_device_cannot_hold_is_refused_before_the_model_loads() {
    refused_before_loading("wgpu");
}

fn refused_before_loading(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let repo = engram_testkit::repo();
    let out = dir.path().join("out");
    // 2,048 adapter values a rank on the tiny fixture (2 layers of 1,024), at 16 bytes each
    // (f32 weight, gradient, AdamW's two moments): 1,638.4 GB at rank 50 M, plus a few MB.
    let (ok, _, stderr) = run(engram()
        .args(["train", "--backend", backend, "--model"])
        .arg(repo.join("tests/fixtures/tiny-f32"))
        .arg("--facts")
        .arg(repo.join("tests/fixtures/facts/synthetic-20.jsonl"))
        .arg("--out")
        .arg(&out)
        .args(["--rank", "50000000"]));
    assert!(!ok, "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line in {stderr}"));
    assert!(line.contains("rank 50000000 on"), "{line}");
    assert!(
        line.contains("needs about 1638.4 GB")
            && line.contains(&format!("the {backend} device has")),
        "{line}"
    );
    assert!(line.contains("ENGRAM_SKIP_MEMORY_CHECK=1"), "{line}");
    // Nothing was loaded (no "loaded … on …" line) and nothing written.
    assert!(!stderr.contains("loaded "), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn a_bad_adapter_setting_is_refused_before_the_model_loads() {
    let dir = tempfile::tempdir().unwrap();
    let repo = engram_testkit::repo();
    for (flag, value, said) in [
        ("--rank", "0", "rank must be at least 1 (got 0)"),
        ("--dropout", "1.5", "dropout must be in [0, 1) (got 1.5)"),
        ("--epochs", "0", "epochs must be at least 1"),
    ] {
        // A model that does not exist: named only if it were loaded first.
        let (ok, _, stderr) = run(engram()
            .args(["train", "--model"])
            .arg(dir.path().join("no-such-model"))
            .arg("--facts")
            .arg(repo.join("tests/fixtures/facts/synthetic-20.jsonl"))
            .arg("--out")
            .arg(dir.path().join("out"))
            .args([flag, value]));
        assert!(!ok, "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("no error line in {stderr}"));
        assert!(line.contains(said), "{flag}: {line}");
        assert!(!line.contains("no-such-model"), "{flag}: {line}");
    }
}

/// A GPU backend asked for but never run (this build has no cuda): the error alone, with no
/// line of zero kernels before it.
#[cfg(not(feature = "cuda"))]
#[test]
fn a_backend_that_never_ran_prints_no_kernel_line() {
    let dir = tempfile::tempdir().unwrap();
    let repo = engram_testkit::repo();
    let (ok, _, stderr) = run(engram()
        .args(["train", "--backend", "cuda", "--model"])
        .arg(repo.join("tests/fixtures/tiny-f32"))
        .arg("--facts")
        .arg(repo.join("tests/fixtures/facts/synthetic-20.jsonl"))
        .arg("--out")
        .arg(dir.path().join("out")));
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("built without the `cuda` feature"),
        "{stderr}"
    );
    assert!(!stderr.contains("GPU kernels:"), "{stderr}");
}
