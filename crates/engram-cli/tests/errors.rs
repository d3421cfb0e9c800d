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
        ("--epochs", "0", "epochs = 0: must be at least 1"),
        ("--lr", "0", "lr = 0: must be a positive number"),
        (
            "--weight-decay",
            "NaN",
            "weight_decay = NaN: must be a number ≥ 0",
        ),
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

/// Runs `engram ARGS` on a model that does not exist (and facts, where `ARGS` names them, that
/// do not either): it must fail saying `said`, naming neither (it stopped before reading them).
fn refused_before_reading(args: &[&str], said: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = run(engram()
        .args(args)
        .arg("--model")
        .arg(dir.path().join("no-such-model")));
    assert!(!ok && stderr.contains(said), "{args:?}: {stderr}");
    assert!(!stderr.contains("no-such"), "{args:?}: {stderr}");
}

/// `generate` flags that would be ignored are refused before the model loads.
#[test]
fn ignored_generate_flags_are_refused() {
    for (flags, said) in [
        (&["--system", "be brief"][..], "--system is a chat turn"),
        (&["--top-p", "0.9"][..], "--top-p applies to sampling"),
        (
            &["--temperature", "0", "--seed", "3"][..],
            "--seed applies to sampling",
        ),
        (
            &["--temperature", "0.7", "--top-p", "1.5"][..],
            "--top-p 1.5",
        ),
    ] {
        let mut args = vec!["generate", "--prompt", "hi"];
        args.extend(flags);
        refused_before_reading(&args, said);
    }
}

/// `answer` flags of another method are refused before the model loads.
#[test]
fn answer_flags_of_another_method_are_refused() {
    for (method, flag, value, said) in [
        (
            "rag",
            "--context-cap",
            "512",
            "--context-cap is only for --method long-context",
        ),
        ("long-context", "--k", "5", "--k is only for --method rag"),
        (
            "lora",
            "--retriever",
            "dense",
            "--retriever is only for --method rag",
        ),
        (
            "rag",
            "--encoder",
            "minilm",
            "--encoder is only for --retriever dense",
        ),
        (
            "rag",
            "--adapter",
            "a",
            "--adapter is only for --method lora",
        ),
    ] {
        refused_before_reading(
            &[
                "answer",
                "--facts",
                "no-such-facts.jsonl",
                "--out",
                "a.jsonl",
                "--method",
                method,
                flag,
                value,
            ],
            said,
        );
    }
}

/// `merge --gguf` writes one file: a shard size is refused with it, not ignored.
#[test]
fn merge_refuses_a_shard_size_for_a_gguf_file() {
    let (ok, _, stderr) = run(engram().args([
        "merge",
        "--model",
        "m.gguf",
        "--adapter",
        "a",
        "--out",
        "o.gguf",
        "--gguf",
        "F16",
        "--shard-bytes",
        "1000",
    ]));
    assert!(
        !ok && stderr.contains("--shard-bytes") && stderr.contains("--gguf"),
        "{stderr}"
    );
}
