//! Helpers of the corpus-to-facts binary tests (`qa.rs`, `rag_bench.rs`): the binary, a run's
//! outcome, and the 600 shared Enron messages ingested and filtered into a corpus.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `engram` binary.
pub fn engram() -> Command {
    Command::new(env!("CARGO_BIN_EXE_engram"))
}

/// Whether it succeeded, its stdout and its stderr.
pub fn run(c: &mut Command) -> (bool, String, String) {
    let o = c.output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `engram corpus ingest FILES --out OUT`, which must succeed; returns `OUT`.
pub fn ingest(files: &Path, out: &Path) -> PathBuf {
    let (ok, _, err) = run(engram()
        .args(["corpus", "ingest"])
        .arg(files)
        .arg("--out")
        .arg(out));
    assert!(ok, "{err}");
    out.to_path_buf()
}

/// The shared Enron messages ingested and filtered into `dir/corpus`; `None` (and a SKIPPED
/// line) where `../shared` does not hold them.
pub fn shared_corpus(dir: &Path) -> Option<PathBuf> {
    let mail = engram_testkit::repo().join("../shared/data/enron-emails/maildir");
    if !mail.is_dir() {
        eprintln!("SKIPPED: ../shared/data/enron-emails/maildir is absent");
        return None;
    }
    let c = ingest(&mail, &dir.join("corpus"));
    let (ok, _, err) = run(engram().args(["corpus", "filter"]).arg(&c));
    assert!(ok, "{err}");
    Some(c)
}
