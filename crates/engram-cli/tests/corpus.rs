//! `engram corpus ingest` and `filter` through the binary on the 600 shared Enron messages:
//! the corpus directory's files, the counts printed, `--explain` for a kept and a dropped
//! document, and named errors for a missing path, a bad setting and a filter that keeps nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn engram() -> Command {
    Command::new(env!("CARGO_BIN_EXE_engram"))
}

fn shared() -> Option<PathBuf> {
    let p = engram_testkit::repo().join("../shared/data/enron-emails/maildir");
    p.is_dir().then_some(p)
}

fn run(c: &mut Command) -> (bool, String, String) {
    let o = c.output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn ingest_filter_and_explain_on_real_mail() {
    let Some(mail) = shared() else {
        eprintln!("SKIPPED: ../shared/data/enron-emails/maildir is absent");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("corpus");
    let (ok, out, err) = run(engram()
        .args(["corpus", "ingest"])
        .arg(&mail)
        .arg("--out")
        .arg(&c));
    assert!(ok, "{err}");
    assert!(
        out.contains("documents (") && out.contains("from 600 files"),
        "{out}"
    );
    let docs = lines(&c.join("documents.jsonl"));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["documents"].as_u64().unwrap() as usize, docs.len());

    let (ok, out, err) = run(engram().args(["corpus", "filter"]).arg(&c));
    assert!(ok, "{err}");
    let decisions = lines(&c.join("decisions.jsonl"));
    let kept = lines(&c.join("kept.jsonl"));
    assert_eq!(decisions.len(), docs.len());
    assert_eq!(
        kept.len(),
        decisions.iter().filter(|d| d["kept"] == true).count()
    );
    assert!(
        out.contains(&format!("{} of {} documents kept", kept.len(), docs.len())),
        "{out}"
    );
    assert!(
        out.contains("exact-duplicate") && out.contains("near-duplicate"),
        "{out}"
    );

    let dropped = decisions.iter().find(|d| d["kept"] == false).unwrap();
    let id = dropped["id"].as_str().unwrap();
    let (ok, out, _) = run(engram()
        .args(["corpus", "filter"])
        .arg(&c)
        .args(["--explain", id]));
    assert!(ok);
    assert!(
        out.contains(&format!("dropped by {}", dropped["rule"].as_str().unwrap())),
        "{out}"
    );
    let (ok, out, _) = run(engram()
        .args(["corpus", "filter"])
        .arg(&c)
        .args(["--explain", kept[0]["id"].as_str().unwrap()]));
    assert!(ok && out.contains("kept: it passed every rule"), "{out}");

    // Bad input.
    let (ok, _, err) = run(engram()
        .args(["corpus", "filter"])
        .arg(&c)
        .args(["--explain", "d0000000000000000"]));
    assert!(
        !ok && err.contains("d0000000000000000: no such document"),
        "{err}"
    );
    let (ok, _, err) = run(engram()
        .args(["corpus", "filter"])
        .arg(&c)
        .args(["--language", "klingon"]));
    assert!(
        !ok && err.contains("language.keep") && err.contains("klingon"),
        "{err}"
    );
    let (ok, _, err) = run(engram()
        .args(["corpus", "filter"])
        .arg(&c)
        .args(["--min-words", "1000000"]));
    assert!(
        !ok && err.contains("nothing is left after filtering")
            && err.contains("quality:too-few-words"),
        "{err}"
    );
    // Settings from a file: applied (the sections left out keep their defaults), unknown keys
    // named.
    let cfg = dir.path().join("filter.toml");
    std::fs::write(
        &cfg,
        "exact = true\n[near]\njaccard = 0.8\n[quality]\nmin_words = 20\n",
    )
    .unwrap();
    let (ok, out, err) = run(engram()
        .args(["corpus", "filter"])
        .arg(&c)
        .arg("--config")
        .arg(&cfg));
    assert!(ok, "{err}");
    assert!(out.contains("language"), "{out}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["filter"]["settings"]["near"]["jaccard"], 0.8);
    assert_eq!(m["filter"]["settings"]["quality"]["min_words"], 20);
    std::fs::write(&cfg, "[near]\nbogus = 1\n").unwrap();
    let (ok, _, err) = run(engram()
        .args(["corpus", "filter"])
        .arg(&c)
        .arg("--config")
        .arg(&cfg));
    assert!(
        !ok && err.contains("filter.toml") && err.contains("bogus"),
        "{err}"
    );
    let missing = dir.path().join("nowhere");
    let (ok, _, err) = run(engram()
        .args(["corpus", "ingest"])
        .arg(&missing)
        .arg("--out")
        .arg(&c));
    assert!(!ok && err.contains("nowhere"), "{err}");
    let (ok, _, err) = run(engram().args(["corpus", "filter"]).arg(dir.path()));
    assert!(!ok && err.contains("manifest.json"), "{err}");
}
