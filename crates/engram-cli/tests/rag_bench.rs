//! `engram rag-bench` through the binary on the 600 shared Enron messages (ingested and
//! filtered): questions made from 40 kept messages' subjects retrieve among all kept messages
//! with BM25; the scores printed and written, the BEIR layout complete; a fact whose source is
//! not in the corpus is named.

mod common;

use common::{engram, run, shared_corpus};

#[test]
fn bm25_over_real_mail_with_a_beir_export() {
    let dir = tempfile::tempdir().unwrap();
    let Some(c) = shared_corpus(dir.path()) else {
        return;
    };
    let kept: Vec<engram_corpus::Document> = engram_corpus::Corpus::at(&c).kept().unwrap();
    // Questions from subjects (long enough to say something), each naming its message.
    let facts: Vec<engram_facts::Fact> = kept
        .iter()
        .filter_map(|d| {
            d.title
                .as_ref()
                .filter(|t| t.split_whitespace().count() >= 3)
                .map(|t| (d, t))
        })
        .take(40)
        .map(|(d, t)| engram_facts::Fact {
            id: format!("{}/q0", d.id),
            question: format!("What was said about {t}?"),
            rephrased_question: format!("What did the message about {t} say?"),
            answer: "-".into(),
            source: Some(d.id.clone()),
        })
        .collect();
    assert_eq!(facts.len(), 40);
    let facts_path = dir.path().join("facts.jsonl");
    engram_facts::write_facts(&facts_path, &facts).unwrap();
    let beir = dir.path().join("beir");
    let scores = dir.path().join("scores.json");
    let (ok, out, err) = run(engram()
        .arg("rag-bench")
        .arg(&c)
        .arg("--facts")
        .arg(&facts_path)
        .args(["--retrievers", "bm25"])
        .arg("--beir")
        .arg(&beir)
        .arg("--out")
        .arg(&scores));
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("40 questions over {} documents", kept.len())),
        "{out}"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&scores).unwrap()).unwrap();
    let m = &s[0]["metrics"];
    let recall = |i: usize| m[i]["recall"].as_f64().unwrap();
    // Subjects name their messages well: most are found first, nearly all in the top 100.
    assert!(
        recall(0) >= 0.5
            && recall(3) >= recall(2)
            && recall(2) >= recall(1)
            && recall(1) >= recall(0),
        "{s}"
    );
    assert!(
        out.contains("bm25") && out.contains("R@10") && out.contains("NDCG@100"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(beir.join("corpus.jsonl"))
            .unwrap()
            .lines()
            .count(),
        kept.len()
    );
    assert_eq!(
        std::fs::read_to_string(beir.join("queries.jsonl"))
            .unwrap()
            .lines()
            .count(),
        40
    );
    assert_eq!(
        std::fs::read_to_string(beir.join("qrels/test.tsv"))
            .unwrap()
            .lines()
            .count(),
        41
    );
    assert_eq!(
        std::fs::read_to_string(beir.join("runs/bm25.trec"))
            .unwrap()
            .lines()
            .count(),
        40 * 100.min(kept.len())
    );

    // A fact whose source is not in the corpus is named.
    let mut bad = facts.clone();
    bad[5].source = Some("d0000000000000000".into());
    engram_facts::write_facts(&facts_path, &bad).unwrap();
    let (ok, _, err) = run(engram()
        .arg("rag-bench")
        .arg(&c)
        .arg("--facts")
        .arg(&facts_path)
        .args(["--retrievers", "bm25"]));
    assert!(!ok);
    assert!(
        err.contains(&bad[5].id) && err.contains("d0000000000000000"),
        "{err}"
    );
}
