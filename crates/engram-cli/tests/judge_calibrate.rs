//! `engram judge --calibrate` end to end: the shipped labelled set judged by an LLM judge behind
//! a loopback OpenAI-compatible server (which rejects `response_format`, so the run falls back to
//! text once) and by the offline judges; the figures written beside the verdicts match ones
//! computed here from the labels and the server's rule.

use std::process::Command;

use engram_testkit::openai::{Reply, Server};
use serde_json::Value;

/// The server's rule: correct when the candidate's line contains the gold answer verbatim.
fn rule(user: &str) -> bool {
    let field = |name: &str| {
        user.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    field("Candidate answer:").contains(&field("Gold answer:"))
}

#[test]
fn calibration_reports_every_judge_against_the_labels() {
    let srv = Server::start(|req| {
        if req.get("response_format").is_some() {
            return Reply::status(
                400,
                r#"{"error": {"message": "response_format is not supported"}}"#,
            );
        }
        let m = req["messages"].as_array().unwrap();
        let user = m.last().unwrap()["content"].as_str().unwrap();
        // Verdict first, as the small-judge prompt asks.
        Reply::completion(if rule(user) {
            "Yes."
        } else {
            "No, another fact."
        })
    });
    let repo = engram_testkit::repo();
    let labels_path = repo.join("experiments/judge-labels/smoke.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("verdicts.jsonl");
    let run = Command::new(env!("CARGO_BIN_EXE_engram"))
        .current_dir(&repo)
        .args(["judge", "--calibrate"])
        .arg(&labels_path)
        .arg("--out")
        .arg(&out)
        .args([
            "--judge",
            "openai",
            "--base-url",
            &srv.url,
            "--judge-model",
            "m",
        ])
        .args([
            "--prompt",
            "configs/judges/small-judge.txt",
            "--concurrency",
            "2",
        ])
        .arg("--cache")
        .arg(dir.path().join("cache.jsonl"))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stderr.matches("rejects `response_format`").count(),
        1,
        "one fallback note: {stderr}"
    );

    // The figures by hand: the server's rule against the labels.
    let labels: Vec<Value> = std::fs::read_to_string(&labels_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (mut tp, mut fp, mut fn_, mut tn) = (0.0, 0.0, 0.0, 0.0);
    for l in &labels {
        // The server sees the candidate's first line (the prompt's `Candidate answer:` line).
        let first = l["answer"].as_str().unwrap().lines().next().unwrap_or("");
        let said = first.contains(l["gold"].as_str().unwrap());
        match (l["label"] == "correct", said) {
            (true, true) => tp += 1.0,
            (false, true) => fp += 1.0,
            (true, false) => fn_ += 1.0,
            (false, false) => tn += 1.0,
        }
    }
    let n = labels.len() as f64;
    let agreement = (tp + tn) / n;
    let chance = ((tp + fp) * (tp + fn_) + (fn_ + tn) * (fp + tn)) / (n * n);

    let rows: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("verdicts.calibration.json")).unwrap(),
    )
    .unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["judge"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "openai:m",
            "offline:exact-match",
            "offline:token-f1>=0.5",
            "offline:gold-recall>=1"
        ]
    );
    let llm = &rows[0];
    assert_eq!(llm["answers"], 32);
    assert_eq!(llm["verdicts"], 32);
    let close = |v: &Value, x: f64| (v.as_f64().unwrap() - x).abs() < 1e-9;
    assert!(close(&llm["agreement"], agreement), "{llm}");
    assert!(close(&llm["precision"], tp / (tp + fp)), "{llm}");
    assert!(close(&llm["recall"], tp / (tp + fn_)), "{llm}");
    assert!(
        close(&llm["kappa"], (agreement - chance) / (1.0 - chance)),
        "{llm}"
    );
    assert_eq!(llm["confusion"]["correct_correct"], tp as u64);
    // Every row covers every answer; the table is printed too.
    assert!(rows.iter().all(|r| r["answers"] == 32));
    assert!(
        stdout.contains("kappa") && stdout.contains("offline:gold-recall>=1"),
        "{stdout}"
    );
    let verdicts = std::fs::read_to_string(&out).unwrap();
    assert_eq!(verdicts.lines().count(), 32);
}

#[test]
fn bad_labels_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let labels = dir.path().join("labels.jsonl");
    std::fs::write(
        &labels,
        "{\"id\": \"1\", \"question\": \"q\", \"gold\": \"g\"}\n",
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["judge", "--judge", "exact-match", "--calibrate"])
        .arg(&labels)
        .arg("--out")
        .arg(dir.path().join("v.jsonl"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("labels.jsonl:1") && stderr.contains("answer"),
        "{stderr}"
    );
}
