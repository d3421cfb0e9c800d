//! The EnronQA parquet loader on fixtures with the dataset's schema: list columns, ids,
//! sources, inbox filter, nested samples, and named errors.

use std::path::Path;

use engram_experiments::{EmailRow, write_parquet};
use engram_experiments::{read_parquet, read_split, split_files};
use engram_facts::nested_samples;

fn row(user: &str, path: &str, n: usize) -> EmailRow {
    EmailRow {
        email: format!(
            "From: {user}@enron.example\nSubject: synthetic email {path}\n\nBody of {path}."
        ),
        path: path.into(),
        user: user.into(),
        questions: (0..n)
            .map(|i| format!("Original question {i} about {path}?"))
            .collect(),
        rephrased_questions: (0..n)
            .map(|i| format!("Rephrased question {i} on {path}?"))
            .collect(),
        gold_answers: (0..n).map(|i| format!("answer {i} of {path}")).collect(),
        incorrect_answers: vec!["wrong".into()],
    }
}

fn write_train(dir: &Path) {
    let files = split_files("train");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    write_parquet(
        &dir.join(files[0]),
        &[
            row("allen-p", "allen-p/inbox/1.", 3),
            row("allen-p", "allen-p/inbox/2.", 0),
            row("bass-e", "bass-e/sent/7.", 2),
        ],
    )
    .unwrap();
    let many: Vec<EmailRow> = (0..40)
        .map(|i| {
            row(
                if i % 2 == 0 { "bass-e" } else { "allen-p" },
                &format!("x/{i}."),
                5,
            )
        })
        .collect();
    write_parquet(&dir.join(files[1]), &many).unwrap();
}

#[test]
fn reads_list_columns_into_facts_with_split_path_index_ids() {
    let dir = tempfile::tempdir().unwrap();
    write_train(dir.path());
    let first = read_parquet(&dir.path().join(split_files("train")[0]), "train").unwrap();
    // 3 + 0 (an email with an empty question list) + 2.
    assert_eq!(first.len(), 5);
    let f = &first[1].fact;
    assert_eq!(f.id, "train/allen-p/inbox/1./1");
    assert_eq!(f.question, "Original question 1 about allen-p/inbox/1.?");
    assert_eq!(
        f.rephrased_question,
        "Rephrased question 1 on allen-p/inbox/1.?"
    );
    assert_eq!(f.answer, "answer 1 of allen-p/inbox/1.");
    assert!(
        f.source
            .as_deref()
            .unwrap()
            .contains("Body of allen-p/inbox/1.")
    );
    assert_eq!(first[3].user, "bass-e");
    assert_eq!(first[4].fact.id, "train/bass-e/sent/7./1");

    let all = read_split(dir.path(), "train", None).unwrap();
    assert_eq!(all.len(), 5 + 40 * 5);
    let ids: std::collections::BTreeSet<&str> = all.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids.len(), all.len(), "ids are unique");
    let inbox = read_split(dir.path(), "train", Some("allen-p")).unwrap();
    assert_eq!(inbox.len(), 3 + 20 * 5);
    assert!(
        inbox
            .iter()
            .all(|f| f.source.as_deref().unwrap().contains("allen-p@"))
    );

    // Nested, seed-deterministic samples of the split.
    let s = nested_samples(&all, &[10, 100, 200], 3).unwrap();
    assert!(s[0].iter().all(|f| s[1].contains(f)));
    assert!(s[1].iter().all(|f| s[2].contains(f)));
    assert_eq!(s, nested_samples(&all, &[10, 100, 200], 3).unwrap());
    assert_ne!(s[0], nested_samples(&all, &[10], 4).unwrap()[0]);
}

#[test]
fn bad_files_get_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    // Lists of different lengths in one row.
    let mut r = row("allen-p", "allen-p/inbox/9.", 2);
    r.gold_answers.pop();
    let path = dir.path().join("uneven.parquet");
    write_parquet(&path, &[r]).unwrap();
    let e = read_parquet(&path, "dev").unwrap_err().to_string();
    assert!(
        e.contains("uneven.parquet")
            && e.contains("2 questions, 2 rephrased questions, 1 gold answers"),
        "{e}"
    );

    // Not parquet at all.
    let junk = dir.path().join("junk.parquet");
    std::fs::write(&junk, b"this is not parquet").unwrap();
    let e = read_parquet(&junk, "dev").unwrap_err().to_string();
    assert!(
        e.contains("junk.parquet") && e.contains("not a readable parquet file"),
        "{e}"
    );

    // A missing split file names the file.
    let e = read_split(dir.path(), "test", None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("test-00000-of-00001.parquet"), "{e}");
}

#[test]
fn reads_a_pyarrow_written_file_with_nested_extra_columns() {
    // Made by tests/peers/make_enronqa_fixture.py (pyarrow, Snappy, row groups of 3, extra
    // list<list<string>> and list<bool> columns as in the real files).
    let root = Path::new(
        &std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"),
    )
    .join("../../tests/fixtures/enronqa");
    let expected: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(root.join("expected.json")).unwrap())
            .unwrap();
    let facts = read_split(&root, "dev", None).unwrap();
    assert_eq!(facts.len(), expected.len());
    for (f, e) in facts.iter().zip(&expected) {
        assert_eq!(f.id, e["id"].as_str().unwrap());
        assert_eq!(f.question, e["question"].as_str().unwrap());
        assert_eq!(
            f.rephrased_question,
            e["rephrased_question"].as_str().unwrap()
        );
        assert_eq!(f.answer, e["answer"].as_str().unwrap());
        assert_eq!(f.source.as_deref(), e["source"].as_str());
    }
    let one = read_split(&root, "dev", Some("bianca.vasquez")).unwrap();
    let want = expected
        .iter()
        .filter(|e| e["user"] == "bianca.vasquez")
        .count();
    assert_eq!(one.len(), want);
}
