//! `engram qa generate` through the binary: `--dry-run` sizes a run over the 600 shared Enron
//! messages (ingested and filtered) and asks nothing; `--local-only` refuses a remote generator
//! before anything is written; a real small model engram runs itself (SmolLM2-135M-Instruct,
//! `--generator local:…`) generates and checks pairs on two short notes, every pair slot
//! recorded and the text logged as sent only to the local model.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{engram, ingest, run, shared_corpus};

/// `engram qa generate CORPUS --out OUT --prompts configs/qa`.
fn qa_generate(corpus: &Path, out: &Path) -> Command {
    let mut c = engram();
    c.args(["qa", "generate"])
        .arg(corpus)
        .arg("--out")
        .arg(out)
        .arg("--prompts")
        .arg(engram_testkit::repo().join("configs/qa"));
    c
}

/// Two short notes as a corpus.
fn small_corpus(dir: &Path) -> PathBuf {
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("a.txt"),
        "Memo. The quarterly gas storage review moves to Thursday, May 17, in room EB-3321. Sara Shackleton will present the Houston figures; please send your numbers to her by Tuesday.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("b.txt"),
        "Note. The new trading desk in Portland opens on June 4. Tim Belden leads it, and the first hires are Chris Foster and Jeff Richter.\n",
    )
    .unwrap();
    ingest(&docs, &dir.join("corpus"))
}

#[test]
fn dry_run_sizes_a_run_over_real_mail_and_asks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let Some(c) = shared_corpus(dir.path()) else {
        return;
    };
    let out = dir.path().join("facts.jsonl");
    let (ok, stdout, err) =
        run(qa_generate(&c, &out).args(["--generator", "http://127.0.0.1:9/v1", "--dry-run"]));
    assert!(ok, "{err}");
    // The golden filter keeps 410 of the 600 (tests/fixtures/corpus/enron-600.json).
    assert!(
        stdout.contains("410 documents → 410 pair slots"),
        "{stdout}"
    );
    assert!(
        stdout.contains("generator calls:") && stdout.contains("judged answers:"),
        "{stdout}"
    );
    assert!(
        !engram_qa::run_dir(&out).exists(),
        "a dry run writes nothing"
    );
}

#[test]
fn local_only_refuses_a_remote_generator() {
    let dir = tempfile::tempdir().unwrap();
    let c = small_corpus(dir.path());
    let out = dir.path().join("facts.jsonl");
    let (ok, _, err) = run(qa_generate(&c, &out)
        .args([
            "--generator",
            "https://llm.example.com/v1",
            "--judge",
            "exact-match",
        ])
        .arg("--local-only"));
    assert!(!ok);
    assert!(
        err.contains("--local-only") && err.contains("https://llm.example.com/v1"),
        "{err}"
    );
    assert!(!engram_qa::run_dir(&out).exists());
}

#[test]
fn a_local_model_generates_and_checks_pairs_on_real_text() {
    let dir = tempfile::tempdir().unwrap();
    let c = small_corpus(dir.path());
    let out = dir.path().join("facts.jsonl");
    let cfg = dir.path().join("qa.toml");
    // Short replies and no refinement keep the run to seconds on the CPU.
    std::fs::write(
        &cfg,
        "max_tokens = 48\nrefine_rounds = 0\nrephrase_tries = 2\nsimilar_documents = 1\n",
    )
    .unwrap();
    let (ok, stdout, err) = run(qa_generate(&c, &out)
        .arg("--config")
        .arg(&cfg)
        .args([
            "--generator",
            "local:smollm2-135m-instruct",
            "--judge",
            "token-f1",
        ])
        .arg("--local-only"));
    // A 135M model rarely writes a pair that survives every check: either outcome is honest,
    // and either way every slot is recorded.
    assert!(
        ok || err.contains("no question–answer pair passed the checks"),
        "{stdout}\n{err}"
    );
    let dir_qa = engram_qa::run_dir(&out);
    let checks = std::fs::read_to_string(dir_qa.join("checks.jsonl")).unwrap();
    assert_eq!(checks.lines().count(), 2, "{checks}");
    for l in checks.lines() {
        let r: engram_qa::PairRecord = serde_json::from_str(l).unwrap();
        assert!(r.kept() || r.reason.is_some(), "{l}");
        assert!(!r.rounds.is_empty());
    }
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir_qa.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["generator"]["endpoint"], "local:smollm2-135m-instruct");
    assert!(
        m["calls"]["generator"]["asked"].as_u64().unwrap() >= 2,
        "{m}"
    );
    let sent = std::fs::read_to_string(dir_qa.join("sent.jsonl")).unwrap();
    assert_eq!(sent.lines().count(), 2, "{sent}");
    assert!(
        sent.lines()
            .all(|l| l.contains("\"endpoint\":\"local:smollm2-135m-instruct\""))
    );
}
