//! `engram rag-bench` through the binary on the 600 shared Enron messages (ingested and
//! filtered): questions made from 40 kept messages' subjects retrieve among all kept messages
//! with BM25; the scores printed and written, the BEIR layout complete; a fact whose source is
//! not in the corpus is named. With `--real-queries`, the generated questions are compared with
//! real ones under the real MiniLM encoder: the very same questions compare as identical
//! (divergence 0, cosine 1 about the same document), keyword queries as different, and the plot
//! is written.

mod common;

use common::{engram, ingest, run, shared_corpus};

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
    let m = &s["generated"][0]["metrics"];
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

/// Questions from the subjects of up to `n` kept messages with a subject of 3+ words.
fn subject_facts(c: &std::path::Path, n: usize) -> Vec<engram_facts::Fact> {
    let kept: Vec<engram_corpus::Document> = engram_corpus::Corpus::at(c).kept().unwrap();
    kept.iter()
        .filter_map(|d| {
            d.title
                .as_ref()
                .filter(|t| t.split_whitespace().count() >= 3)
                .map(|t| (d, t))
        })
        .take(n)
        .map(|(d, t)| engram_facts::Fact {
            id: format!("{}/q0", d.id),
            question: format!("What was said about {t}?"),
            rephrased_question: format!("What did the message about {t} say?"),
            answer: "-".into(),
            source: Some(d.id.clone()),
        })
        .collect()
}

#[test]
fn generated_questions_compared_with_real_queries() {
    let dir = tempfile::tempdir().unwrap();
    let Some(c) = shared_corpus(dir.path()) else {
        return;
    };
    let facts = subject_facts(&c, 24);
    let facts_path = dir.path().join("facts.jsonl");
    engram_facts::write_facts(&facts_path, &facts).unwrap();
    let bench = |real: &std::path::Path, tag: &str| {
        let out = dir.path().join(format!("{tag}.json"));
        let plot = dir.path().join(format!("{tag}.svg"));
        let (ok, stdout, err) = run(engram()
            .arg("rag-bench")
            .arg(&c)
            .arg("--facts")
            .arg(&facts_path)
            .args(["--retrievers", "bm25"])
            .arg("--real-queries")
            .arg(real)
            .arg("--plot")
            .arg(&plot)
            .arg("--out")
            .arg(&out));
        assert!(ok, "{err}");
        let svg = std::fs::read_to_string(&plot).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("generated (24)"),
            "{tag}"
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        (stdout, report)
    };

    // The generated questions themselves as the real ones: the same distribution.
    let same = dir.path().join("same.jsonl");
    let lines: Vec<String> = facts
        .iter()
        .map(|f| serde_json::json!({"query": f.question, "document": f.source}).to_string())
        .collect();
    std::fs::write(&same, lines.join("\n") + "\n").unwrap();
    let (stdout, r) = bench(&same, "same");
    assert!(
        stdout.contains("bm25 (real)") && stdout.contains("Jensen–Shannon"),
        "{stdout}"
    );
    let cmp = &r["comparison"];
    assert_eq!(cmp["js_divergence"], 0.0, "{cmp}");
    assert_eq!(cmp["ks_statistic"], 0.0, "{cmp}");
    assert!(
        cmp["same_document"]["min"].as_f64().unwrap() > 0.9999,
        "{cmp}"
    );
    assert_eq!(r["real"][0]["mrr"], r["generated"][0]["mrr"]);

    // Terse keyword queries, as people type them, two without a document.
    let terse = dir.path().join("terse.jsonl");
    let mut lines: Vec<String> = facts
        .iter()
        .map(|f| {
            let q: Vec<&str> = f
                .question
                .trim_start_matches("What was said about ")
                .split_whitespace()
                .take(2)
                .collect();
            serde_json::json!({"query": q.join(" ").to_lowercase(), "document": f.source})
                .to_string()
        })
        .collect();
    lines.push(r#"{"query": "gas prices california"}"#.into());
    lines.push(r#"{"query": "meeting next week"}"#.into());
    std::fs::write(&terse, lines.join("\n") + "\n").unwrap();
    let (_, r) = bench(&terse, "terse");
    let cmp = &r["comparison"];
    assert_eq!(cmp["real"], 26);
    assert_eq!(cmp["real_query_document"]["n"], 24);
    assert!(cmp["js_divergence"].as_f64().unwrap() > 0.0, "{cmp}");
    assert!(
        cmp["same_document"]["mean"].as_f64().unwrap() < 0.9999,
        "{cmp}"
    );

    // A real query naming a document the corpus lacks is named.
    std::fs::write(&terse, r#"{"query": "x", "document": "d0000000000000000"}"#).unwrap();
    let (ok, _, err) = run(engram()
        .arg("rag-bench")
        .arg(&c)
        .arg("--facts")
        .arg(&facts_path)
        .arg("--real-queries")
        .arg(&terse));
    assert!(!ok);
    assert!(
        err.contains("d0000000000000000") && err.contains("terse.jsonl"),
        "{err}"
    );
}

/// Planted notes: a project, its code, and another project it mentions.
const NOTES: [(&str, &str, &str); 6] = [
    ("ALDER", "K-41", "BIRCH"),
    ("BIRCH", "R-7", "ALDER"),
    ("CEDAR", "Q-19", "ALDER"),
    ("DAHLIA", "T-3", "CEDAR"),
    ("ELM", "Z-88", "DAHLIA"),
    ("FIR", "M-5", "ELM"),
];

#[test]
fn reader_accuracy_follows_what_each_condition_shows() {
    use engram_testkit::openai::{Reply, Server};
    use std::sync::atomic::Ordering;

    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    for (name, code, other) in NOTES {
        std::fs::write(
            notes.join(format!("{}.txt", name.to_lowercase())),
            format!("Memo {name}.\nThe access code of project {name} is {code}. Project {other} keeps its own code; ask its lead for project {other} matters.\n"),
        )
        .unwrap();
    }
    let c = ingest(&notes, &dir.path().join("corpus"));
    let docs = engram_corpus::Corpus::at(&c).documents().unwrap();
    let facts: Vec<engram_facts::Fact> = NOTES
        .iter()
        .map(|(name, code, _)| {
            let doc = docs
                .iter()
                .find(|d| d.text.contains(&format!("Memo {name}.")))
                .unwrap();
            engram_facts::Fact {
                id: name.to_string(),
                question: format!("Which project {name} code opens it?"),
                rephrased_question: format!("What opens project {name}?"),
                answer: code.to_string(),
                source: Some(doc.id.clone()),
            }
        })
        .collect();
    let facts_path = dir.path().join("facts.jsonl");
    engram_facts::write_facts(&facts_path, &facts).unwrap();
    // A reader that answers only from what it is shown: the code of the project asked about
    // when its memo is among the documents, else nothing useful.
    let server = Server::start(|body| {
        let user = body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        let (name, code, _) = NOTES
            .iter()
            .find(|(n, _, _)| user.contains(&format!("Which project {n} code")))
            .unwrap();
        let shown = user.contains(&format!("Memo {name}."));
        Reply::completion(if shown { code } else { "I cannot tell." })
    });
    let out = dir.path().join("scores.json");
    let bench = || {
        run(engram()
            .arg("rag-bench")
            .arg(&c)
            .arg("--facts")
            .arg(&facts_path)
            .args(["--retrievers", "bm25", "--k", "1,3", "--reader-k", "1,3"])
            .args([
                "--reader",
                &server.url,
                "--reader-model",
                "scripted",
                "--judge",
                "exact-match",
            ])
            .arg("--prompts")
            .arg(engram_testkit::repo().join("configs/qa"))
            .arg("--out")
            .arg(&out))
    };
    let (ok, stdout, err) = bench();
    assert!(ok, "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let acc = |name: &str| {
        r["reader"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["condition"] == name)
            .unwrap_or_else(|| panic!("{name}: {r}"))["accuracy"]
            .as_f64()
            .unwrap()
    };
    let recall = |i: usize| r["generated"][0]["metrics"][i]["recall"].as_f64().unwrap();
    assert_eq!(acc("closed-book"), 0.0);
    assert_eq!(acc("oracle"), 1.0);
    // The reader is right exactly when retrieval showed it the memo: accuracy = Recall@k.
    assert_eq!(acc("bm25@1"), recall(0), "{r}");
    assert_eq!(acc("bm25@3"), recall(1), "{r}");
    assert!(
        stdout.contains("oracle") && stdout.contains("closed-book"),
        "{stdout}"
    );
    // One call per distinct prompt: a top-1 listing that is the right memo is the oracle's
    // prompt, asked once.
    let asked = server.hits.load(Ordering::SeqCst);
    let right_at_1 = (acc("bm25@1") * 6.0).round() as usize;
    assert_eq!(asked, 6 * 4 - right_at_1, "{stdout}");

    // A rerun answers every call from the cache.
    let (ok, stdout, err) = bench();
    assert!(ok, "{err}");
    assert_eq!(server.hits.load(Ordering::SeqCst), asked);
    assert!(
        stdout.contains("0 calls asked, 24 from the cache"),
        "{stdout}"
    );

    // --reader-k deeper than the ranking is named.
    let (ok, _, err) = run(engram()
        .arg("rag-bench")
        .arg(&c)
        .arg("--facts")
        .arg(&facts_path)
        .args(["--retrievers", "bm25", "--k", "1", "--reader-k", "3"])
        .args([
            "--reader",
            &server.url,
            "--reader-model",
            "scripted",
            "--judge",
            "exact-match",
        ]));
    assert!(!ok);
    assert!(err.contains("--reader-k 3"), "{err}");
}
