//! The rendered views against golden files (`tests/golden/`; regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p engram-experiments --test table_golden` and review the diff),
//! and corrupt records reported, never used.

use std::path::{Path, PathBuf};

use engram_experiments::render_dir;
use engram_experiments::{
    Cell, CellMetrics, CellRecord, CellStatus, CurrentPlan, Method, Reference, ResultsDir, Table,
};
use engram_experiments::{JudgeCounts, QuestionRecord, Timings, Versions};
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
    let cell = Cell::new(n, method);
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
        format: engram_experiments::RECORD_FORMAT,
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
        kernels: None,
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
    golden("plot.svg", &engram_experiments::plot_svg(&table));
    golden("per_fact.md", &engram_experiments::per_fact_markdown(&recs));
    golden("per_fact.csv", &engram_experiments::per_fact_csv(&recs));

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
    // Metrics that do not parse (figures of the wrong type): corrupt, where they used to read
    // as absent and the cell as healthy.
    for (cell, key, value) in [
        ("n10-lora-r8", "epochs", serde_json::json!("3")),
        ("n10-lora-r64", "correct", serde_json::json!("9")),
    ] {
        let p = results.record_path(cell);
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        if key == "epochs" {
            v["metrics"]["final_loss"] = serde_json::json!(0.1);
            v["metrics"]["trainable_params"] = serde_json::json!(1);
        }
        v["metrics"][key] = value;
        std::fs::write(&p, v.to_string()).unwrap();
    }
    let r = render_dir(dir.path(), None).unwrap();
    assert_eq!(r.corrupt.len(), 4, "{:?}", r.corrupt);
    for (cell, what) in [
        ("n10-lora-r8", "method figures"),
        ("n10-lora-r64", "verdict counts"),
    ] {
        assert!(
            r.corrupt
                .iter()
                .any(|c| c.contains(&format!("{cell}.json")) && c.contains(what)),
            "{cell}: {:?}",
            r.corrupt
        );
    }
    assert!(
        r.corrupt
            .iter()
            .any(|c| c.contains("n10-rag.json") && c.contains("corrupt cell record"))
    );
    assert!(r.corrupt.iter().any(|c| c.contains("n10-lora-r999.json")));
    assert!(!r.table.entries.contains_key(&(10, Method::Rag)));
    assert!(
        r.markdown.contains("| 10 | 0.800 [0.49, 0.94] | – |"),
        "{}",
        r.markdown
    );
    for f in engram_experiments::VIEW_FILES {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
}

#[test]
fn records_the_current_plan_does_not_hold_are_marked_stale() {
    let dir = tempfile::tempdir().unwrap();
    let results = ResultsDir::new(dir.path());
    results.create().unwrap();
    for r in records() {
        results.write(&r).unwrap();
    }
    // Without a plan (results of earlier versions) nothing is marked.
    let r = render_dir(dir.path(), None).unwrap();
    assert!(r.table.stale.is_empty() && !r.markdown.contains('‡'));
    assert!(r.plan_unreadable.is_none());
    // The experiment now: r8 at 10 facts has another configuration, and 20 facts with RAG
    // is no longer a cell of it; every other record is current.
    let mut cells: std::collections::BTreeMap<String, String> = records()
        .iter()
        .map(|r| (r.cell_id.clone(), r.config_hash.clone()))
        .collect();
    cells.insert("n10-lora-r8".into(), "1".into());
    cells.remove("n20-rag");
    results
        .write_plan(&CurrentPlan {
            experiment: "golden".into(),
            cells,
        })
        .unwrap();
    let r = render_dir(dir.path(), None).unwrap();
    assert_eq!(
        r.table.stale.keys().copied().collect::<Vec<_>>(),
        [(10, Method::Lora { rank: 8 }), (20, Method::Rag)]
    );
    assert!(
        r.markdown
            .contains("| 10 | 0.800 [0.49, 0.94] | 1.000 [0.72, 1.00] | 0.600 [0.31, 0.83]‡ |"),
        "{}",
        r.markdown
    );
    assert!(
        r.markdown
            .contains("- n10-lora-r8: made with another configuration")
    );
    assert!(
        r.markdown
            .contains("- n20-rag: not a cell of experiment golden")
    );
    let csv = std::fs::read_to_string(dir.path().join("table.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",stale"), "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("10,LoRA r=8,done,") && l.contains("n10-lora-r8: made with")),
        "{csv}"
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("10,Long Context,done,") && l.ends_with(',')),
        "{csv}"
    );
    // A plan that does not parse: named, and nothing marked.
    std::fs::write(results.plan_path(), "{").unwrap();
    let r = render_dir(dir.path(), None).unwrap();
    assert!(r.table.stale.is_empty());
    assert!(r.plan_unreadable.unwrap().contains("plan.json"));
}

#[test]
fn an_unreadable_results_directory_is_named() {
    let missing = PathBuf::from("/nonexistent/results/x");
    let e = render_dir(&missing, None).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/results/x"), "{e}");
}

#[test]
fn replicates_show_their_mean_and_interval_and_broken_runs_no_accuracy() {
    use engram_experiments::Entry;
    use engram_experiments::MethodMetrics;
    let lora = |rep: usize, right: fn(usize) -> bool, losses: Vec<f64>| {
        let mut r = record(20, Method::Lora { rank: 8 }, CellStatus::Done, right);
        r.cell.replicate = rep;
        r.cell_id = r.cell.id();
        r.metrics.method = Some(MethodMetrics::Lora {
            final_loss: losses.last().copied(),
            epochs: losses.len(),
            trainable_params: 1,
            resumed_after_epoch: None,
            epoch_losses: losses,
            curve: vec![],
        });
        r
    };
    let fine = vec![3.0, 1.0, 0.1];
    let recs = vec![
        record(20, Method::Rag, CellStatus::Done, |i| i < 7),
        lora(0, |i| i < 14, fine.clone()),
        lora(1, |i| i < 12, fine.clone()),
        lora(2, |i| i < 16, fine.clone()),
        // A fourth replicate whose loss blew up: left out, and said why.
        lora(3, |_| false, vec![3.0, f64::NAN]),
        {
            let mut r = record(20, Method::Lora { rank: 64 }, CellStatus::Done, |_| false);
            r.metrics.method = Some(MethodMetrics::Lora {
                final_loss: Some(0.77),
                epochs: 5,
                trainable_params: 1,
                resumed_after_epoch: None,
                epoch_losses: vec![3.0, 1.2, 0.05, 0.3, 0.77],
                curve: vec![],
            });
            r
        },
    ];
    let t = Table::from_records(&recs);
    let Some(Entry::Accuracy {
        value,
        replicates,
        interval: Some(i),
        n,
        excluded,
        ..
    }) = t.entries.get(&(20, Method::Lora { rank: 8 }))
    else {
        panic!("{:?}", t.entries)
    };
    assert_eq!(replicates, &vec![0.7, 0.6, 0.8]);
    assert!((value - 0.7).abs() < 1e-12);
    assert_eq!(*n, 60);
    assert!(i.low < 0.7 && i.high > 0.7 && i.high - i.low < 0.5, "{i:?}");
    assert_eq!(excluded.len(), 1);
    assert!(matches!(
        t.entries.get(&(20, Method::Lora { rank: 64 })),
        Some(Entry::Collapsed(_))
    ));
    let md = t.markdown(None);
    assert!(md.contains(" ×3†"), "{md}");
    assert!(md.contains("| collapsed |"), "{md}");
    assert!(
        md.contains("replicate 3 left out — the loss was NaN at epoch 2"),
        "{md}"
    );
    // RAG: 7/20, Wilson's interval.
    assert!(md.contains("0.350 [0.18, 0.57]"), "{md}");
    assert!(md.contains("| 20 | LoRA r=8 − RAG | +0.350"), "{md}");
    let csv = t.csv();
    assert!(csv.contains("20,LoRA r=8,done,0.7000,"), "{csv}");
    assert!(csv.contains(",60,3,0.7000;0.6000;0.8000"), "{csv}");
    assert!(csv.contains("20,LoRA r=64,collapsed,"), "{csv}");

    // --compare: a reference value outside a cell's interval is marked, one inside is not.
    let reference = Reference {
        label: "ref.csv".into(),
        values: [
            ((20, "RAG".to_string()), "0.90".to_string()),
            ((20, "LoRA r=8".to_string()), "0.70".to_string()),
        ]
        .into_iter()
        .collect(),
    };
    let md = t.markdown(Some(&reference));
    assert!(md.contains("0.350 [0.18, 0.57] (0.90)* |"), "{md}");
    assert!(md.contains("(0.70) |"), "{md}");

    // --paired: methods by slug or header; an unknown one is named with the ones there are.
    assert_eq!(t.method_named("lora-r8").unwrap(), Method::Lora { rank: 8 });
    assert_eq!(t.method_named("RAG").unwrap(), Method::Rag);
    let e = t.method_named("lora-r16").unwrap_err().to_string();
    assert!(
        e.contains("lora-r16") && e.contains("lora-r8, lora-r64"),
        "{e}"
    );
    let rows = t.paired_rows(Method::Lora { rank: 8 }, Method::Rag);
    assert_eq!(rows.len(), 1);
    // Paired per replicate: facts 7..12, 7..14 and 7..16 right only for LoRA in one replicate
    // each; the fact is the unit, so 9 facts (7..16) LoRA did better on, over 3 × 20 pairs.
    assert_eq!(
        (
            rows[0].1.first_better,
            rows[0].1.second_better,
            rows[0].1.pairs
        ),
        (9, 0, 60)
    );
}

/// A done LoRA cell of `n` facts (half right) at `rank`, replicate `rep`, whose loss fell all
/// the way (only its memorization `curve` can tell how it went).
fn curved_lora(n: usize, rank: usize, rep: usize, curve: Vec<(usize, f64)>) -> CellRecord {
    use engram_experiments::MethodMetrics;
    let mut r = record(n, Method::Lora { rank }, CellStatus::Done, move |i| {
        2 * i < n
    });
    r.cell.replicate = rep;
    r.metrics.method = Some(MethodMetrics::Lora {
        final_loss: Some(0.1),
        epochs: 4,
        trainable_params: 1,
        resumed_after_epoch: None,
        epoch_losses: vec![3.0, 1.0, 0.3, 0.1],
        curve,
    });
    r
}

#[test]
fn a_memorization_curve_shows_in_the_per_fact_view_and_a_fallen_one_is_a_collapse() {
    let lora = |rank: usize, curve: Vec<(usize, f64)>| curved_lora(20, rank, 0, curve);
    let recs = vec![
        lora(8, vec![(2, 0.25), (4, 0.5)]),
        lora(64, vec![(2, 0.9), (4, 0.5)]),
    ];
    let md = engram_experiments::per_fact_markdown(&recs);
    assert!(md.contains("| Exact match during training |"), "{md}");
    assert!(md.contains("| 2: 0.25, 4: 0.50 | fine |"), "{md}");
    assert!(
        md.contains("collapsed: exact match on the trained questions reached 0.900 at epoch 2 and ended at 0.500"),
        "{md}"
    );
    let t = Table::from_records(&recs);
    assert!(matches!(
        t.entries.get(&(20, Method::Lora { rank: 64 })),
        Some(engram_experiments::Entry::Collapsed(_))
    ));
    assert!(matches!(
        t.entries.get(&(20, Method::Lora { rank: 8 })),
        Some(engram_experiments::Entry::Accuracy { .. })
    ));
}

#[test]
fn curves_are_drawn_where_records_have_them() {
    let lora =
        |rank: usize, rep: usize, curve: Vec<(usize, f64)>| curved_lora(10, rank, rep, curve);
    let without = vec![record(10, Method::Rag, CellStatus::Done, |i| i < 3)];
    assert!(engram_experiments::curves_svg(&without).is_none());
    let with = vec![
        lora(8, 0, vec![(2, 0.25), (4, 0.5)]),
        lora(8, 1, vec![(2, 0.0), (4, 0.75)]),
        lora(64, 0, vec![(2, 0.5), (4, 1.0)]),
    ];
    let svg = engram_experiments::curves_svg(&with).expect("curves drawn");
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains("10 facts: exact match on trained questions"));
    // One legend entry per rank, not per replicate.
    assert_eq!(svg.matches("\nLoRA r=8\n").count(), 1, "{svg}");
    assert_eq!(svg.matches("\nLoRA r=64\n").count(), 1, "{svg}");
}

#[test]
fn resampled_runs_are_scored_on_their_own_facts_and_paired_within_a_replicate() {
    use engram_experiments::Entry;
    // Replicate k answers facts f{100k}…: each run's own sample.
    let run = |method: Method, rep: usize, right: fn(usize) -> bool| {
        let mut r = record(10, method, CellStatus::Done, right);
        r.cell.replicate = rep;
        r.cell_id = r.cell.id();
        for (i, q) in r.questions.iter_mut().enumerate() {
            q.id = format!("f{:03}", 100 * rep + i);
        }
        r
    };
    let lora = Method::Lora { rank: 8 };
    let recs = vec![
        run(Method::Rag, 0, |i| i < 4),
        run(Method::Rag, 1, |i| i < 6),
        run(lora, 0, |i| i < 8),
        run(lora, 1, |i| i < 10),
    ];
    let t = Table::from_records(&recs);
    assert!(t.resampled());
    let Some(Entry::Accuracy {
        value, replicates, ..
    }) = t.entries.get(&(10, lora))
    else {
        panic!("{:?}", t.entries)
    };
    // Replicate 1 is scored on its own facts (10/10), not on replicate 0's ids (0/10).
    assert_eq!(replicates, &vec![0.8, 1.0]);
    assert!((value - 0.9).abs() < 1e-12);
    // Pairs only within a replicate, each on its own facts: 4 + 4 facts only LoRA got right,
    // 20 facts over 20 pairs.
    let p = t.paired(10, lora, Method::Rag).unwrap();
    assert_eq!(
        (p.first_better, p.second_better, p.facts, p.pairs),
        (8, 0, 20, 20)
    );
    assert!(t.markdown(None).contains("Facts resampled per replicate"));
    // A run of one method on facts the other never answered is not paired with it.
    let t = Table::from_records(&recs[..3]);
    let p = t.paired(10, lora, Method::Rag).unwrap();
    assert_eq!(p.pairs, 10);
    // Without resampling, nothing of this shows.
    assert!(!Table::from_records(&records()).resampled());
}
