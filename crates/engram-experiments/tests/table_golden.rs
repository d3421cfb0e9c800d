//! The rendered views against golden files (`tests/golden/`; regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p engram-experiments --test table_golden` and review the diff),
//! and corrupt records reported, never used.

use std::path::{Path, PathBuf};

use engram_experiments::record::{JudgeCounts, QuestionRecord, Timings, Versions};
use engram_experiments::render::render_dir;
use engram_experiments::{
    Cell, CellMetrics, CellRecord, CellStatus, Method, Reference, ResultsDir, Table,
};
use serde_json::json;

fn golden(name: &str, text: &str) {
    let path = Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
    )
    .join("tests/golden")
    .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(text, want, "{} differs", path.display());
}

/// A record where question i is right when `right(i)`.
fn record(
    n: usize,
    method: Method,
    status: CellStatus,
    right: impl Fn(usize) -> bool,
) -> CellRecord {
    let cell = Cell { facts: n, method };
    let questions: Vec<QuestionRecord> = if status == CellStatus::Failed {
        Vec::new()
    } else {
        (0..n)
            .map(|i| QuestionRecord {
                id: format!("f{i:03}"),
                question: format!("q{i}?"),
                gold: format!("a{i}"),
                answer: (status == CellStatus::Done).then(|| format!("a{i}")),
                correct: (status == CellStatus::Done).then(|| right(i)),
                judge_raw: String::new(),
                judge_follow_up: None,
            })
            .collect()
    };
    let correct = questions.iter().filter(|q| q.correct == Some(true)).count();
    CellRecord {
        format: engram_experiments::record::FORMAT,
        experiment: "golden".into(),
        cell_id: cell.id(),
        cell,
        config_hash: "0".into(),
        config: json!({}),
        status,
        error: None,
        accuracy: (status == CellStatus::Done).then(|| correct as f64 / n as f64),
        metrics: CellMetrics {
            judged: Some(JudgeCounts {
                correct,
                judged: questions.len(),
                judge: "offline:token-f1>=0.5".into(),
            }),
            method: None,
        },
        questions,
        timings: Timings::default(),
        versions: Versions::default(),
        finished_unix: 0,
    }
}

fn records() -> Vec<CellRecord> {
    use CellStatus::*;
    use Method::*;
    vec![
        record(10, LongContext, Done, |i| i < 8),
        record(10, Rag, Done, |_| true),
        record(10, Lora { rank: 8 }, Done, |i| i % 3 != 0),
        record(10, Lora { rank: 64 }, Done, |i| i != 4),
        record(20, LongContext, Na, |_| false),
        record(20, Rag, Done, |i| i != 19),
        record(20, Lora { rank: 8 }, Failed, |_| false),
        record(20, Lora { rank: 64 }, Done, |i| i % 2 == 0),
    ]
}

#[test]
fn table_markdown_csv_plot_and_per_fact_match_golden_files() {
    let mut recs = records();
    // (20, r64) not run yet: a missing entry.
    recs.retain(|r| r.cell_id != "n20-lora-r64");
    let table = Table::from_records(&recs);
    golden("table.md", &table.markdown(None));
    golden("table.csv", &table.csv());
    golden("plot.svg", &engram_experiments::plot::svg(&table));
    golden(
        "per_fact.md",
        &engram_experiments::per_fact::markdown(&recs),
    );
    golden("per_fact.csv", &engram_experiments::per_fact::csv(&recs));

    let paper = Reference::read(
        &Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
        )
        .join("../../configs/paper/enronqa-table5.csv"),
    )
    .unwrap();
    let mut md = table.markdown(Some(&paper));
    md = md.replace(&paper.label, "configs/paper/enronqa-table5.csv");
    golden("table-compare-paper.md", &md);
}

#[test]
fn corrupt_records_are_reported_and_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let results = ResultsDir::new(dir.path());
    results.create().unwrap();
    for r in records() {
        results.write(&r).unwrap();
    }
    // Truncate one record and mislabel another.
    let p = results.record_path("n10-rag");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, &text[..text.len() / 2]).unwrap();
    std::fs::copy(
        results.record_path("n10-long-context"),
        results.record_path("n10-lora-r999"),
    )
    .unwrap();
    let r = render_dir(dir.path(), None).unwrap();
    assert_eq!(r.corrupt.len(), 2, "{:?}", r.corrupt);
    assert!(
        r.corrupt
            .iter()
            .any(|c| c.contains("n10-rag.json") && c.contains("corrupt cell record"))
    );
    assert!(r.corrupt.iter().any(|c| c.contains("n10-lora-r999.json")));
    assert!(!r.table.entries.contains_key(&(10, Method::Rag)));
    assert!(r.markdown.contains("| 10 | 0.800 | – |"), "{}", r.markdown);
    for f in engram_experiments::render::VIEW_FILES {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
}

#[test]
fn an_unreadable_results_directory_is_named() {
    let missing = PathBuf::from("/nonexistent/results/x");
    let e = render_dir(&missing, None).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/results/x"), "{e}");
}
