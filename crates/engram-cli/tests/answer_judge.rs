//! The three commands a user runs by hand, end to end on the tiny fixture: `engram train --eval`
//! trains an adapter and prints its exact match; `engram answer` writes one line per question
//! for each method (the adapter's, long context past its window as NA lines, RAG); `engram
//! judge` scores those files — the adapter's answers to the trained questions get the same
//! exact-match count `--eval` printed, and NA lines get no verdict.

mod common;

use std::path::Path;

use common::{engram, run};

/// `engram answer` with `args` into `out`, which must succeed; the file's lines as JSON.
fn answer(facts: &Path, out: &Path, args: &[&std::ffi::OsStr]) -> Vec<serde_json::Value> {
    let (ok, _, err) = run(engram()
        .current_dir(engram_testkit::repo())
        .args(["answer", "--model", "tests/fixtures/tiny-f32", "--facts"])
        .arg(facts)
        .args(args)
        .arg("--out")
        .arg(out));
    assert!(ok, "{err}");
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `engram judge --judge exact-match` of `answers`, which must succeed: its stdout line and the
/// verdicts written.
fn judge(answers: &Path, out: &Path) -> (String, Vec<serde_json::Value>) {
    let (ok, stdout, err) = run(engram()
        .args(["judge", "--judge", "exact-match", "--answers"])
        .arg(answers)
        .arg("--out")
        .arg(out));
    assert!(ok, "{err}");
    let verdicts = std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (stdout, verdicts)
}

#[test]
fn train_eval_answer_and_judge_agree_on_the_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let facts = dir.path().join("facts.jsonl");
    let all = std::fs::read_to_string(engram_testkit::fixtures().join("facts/synthetic-20.jsonl"))
        .unwrap();
    let ten: Vec<&str> = all.lines().take(10).collect();
    std::fs::write(&facts, ten.join("\n") + "\n").unwrap();
    let adapter = dir.path().join("adapter");
    let (ok, stdout, err) = run(engram()
        .current_dir(engram_testkit::repo())
        .args([
            "train",
            "--backend",
            "cpu",
            "--model",
            "tests/fixtures/tiny-f32",
            "--rank",
            "16",
            "--epochs",
            "40",
            "--lr",
            "1e-2",
            "--batch-size",
            "5",
            "--no-checkpoints",
            "--eval",
            "--facts",
        ])
        .arg(&facts)
        .arg("--out")
        .arg(&adapter));
    assert!(ok, "{err}");
    // "exact match on rephrased (trained) questions: H/10 = …"
    let trained_hits: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("exact match on rephrased (trained) questions: "))
        .and_then(|rest| rest.split('/').next())
        .expect("--eval prints the trained questions' exact match")
        .parse()
        .unwrap();
    assert!(trained_hits > 0, "40 epochs memorize something: {stdout}");

    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let lora_file = dir.path().join("lora.jsonl");
    let lora = answer(
        &facts,
        &lora_file,
        &[
            os("--method"),
            os("lora"),
            os("--questions"),
            os("rephrased"),
            os("--adapter"),
            adapter.as_os_str(),
        ],
    );
    assert_eq!(lora.len(), 10);
    for (line, fact) in lora.iter().zip(&ten) {
        let fact: serde_json::Value = serde_json::from_str(fact).unwrap();
        assert_eq!(line["method"], "lora");
        assert_eq!(line["question"], fact["rephrased_question"]);
        assert_eq!(line["gold"], fact["answer"]);
        assert!(
            line["answer"].is_string() && line["tokens"].is_u64(),
            "{line}"
        );
        assert!(line.get("na").is_none(), "{line}");
    }
    let (said, verdicts) = judge(&lora_file, &dir.path().join("lora-verdicts.jsonl"));
    let correct = verdicts.iter().filter(|v| v["correct"] == true).count();
    assert_eq!(
        correct, trained_hits,
        "the judge's exact match is --eval's: {said}"
    );
    assert!(
        said.starts_with(&format!("offline:exact-match: {correct}/10 correct")),
        "{said}"
    );

    // Long context past a 50-token window: every line NA, and no verdict for any.
    let na_file = dir.path().join("long-context.jsonl");
    let na = answer(
        &facts,
        &na_file,
        &[
            os("--method"),
            os("long-context"),
            os("--context-cap"),
            os("50"),
        ],
    );
    assert_eq!(na.len(), 10);
    assert!(
        na.iter()
            .all(|l| l["answer"].is_null() && l["na"] == true && l.get("tokens").is_none()),
        "{na:?}"
    );
    let (_, verdicts) = judge(&na_file, &dir.path().join("na-verdicts.jsonl"));
    assert!(
        verdicts.iter().all(|v| v["correct"].is_null()),
        "{verdicts:?}"
    );

    // RAG retrieving 2 facts: an answer on every line.
    let rag = answer(
        &facts,
        &dir.path().join("rag.jsonl"),
        &[os("--method"), os("rag"), os("--k"), os("2")],
    );
    assert_eq!(rag.len(), 10);
    assert!(
        rag.iter()
            .all(|l| l["method"] == "rag" && l["answer"].is_string())
    );
}
