//! RAG: BM25 finds the source fact of exact-copy questions; answers come back for every
//! question; bad settings are named.

use burn::tensor::Device;
use engram_baselines::{Bm25Index, RagConfig, Retriever, rag_answers};
use engram_checkpoint::Checkpoint;
use engram_facts::{Fact, read_facts};
use engram_model::{AnswerConfig, Llama, WeightDType};
use engram_testkit::fixtures;
use engram_tokenizer::ChatTokenizer;

fn facts() -> Vec<Fact> {
    read_facts(&fixtures().join("facts/synthetic-500.jsonl")).unwrap()
}

#[test]
fn bm25_finds_the_source_of_exact_copy_questions() {
    let facts = facts();
    let index = Bm25Index::new(&facts).unwrap();
    let mut top1 = 0;
    for (i, f) in facts.iter().enumerate() {
        let hits = index.search(&format!("{} {}", f.rephrased_question, f.answer), 5);
        assert_eq!(hits.len(), 5);
        if hits[0] == i {
            top1 += 1;
        }
        assert!(hits.contains(&i), "fact {i} not in its own top 5");
    }
    eprintln!("exact-copy top-1: {top1}/{}", facts.len());
    assert_eq!(top1, facts.len());
    // k above the corpus returns every fact once.
    let all = index.search("budget meeting", 10_000);
    assert_eq!(all.len(), facts.len());
}

#[test]
fn rag_answers_every_question_and_measures_retrieval() {
    let dir = fixtures().join("tiny-f32");
    let ckpt = Checkpoint::open(dir.to_str().unwrap()).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &Device::flex()).unwrap();
    let tok = ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    let facts: Vec<Fact> = facts().into_iter().take(30).collect();
    let questions: Vec<String> = facts.iter().take(6).map(|f| f.question.clone()).collect();
    let gold: Vec<usize> = (0..6).collect();
    let cfg = RagConfig {
        answer: AnswerConfig {
            batch_size: 3,
            max_new_tokens: 4,
            stop_ids: tok.stop_ids(&model.config.eos_token_ids),
            ..Default::default()
        },
        k: 5,
        retriever: Retriever::Bm25,
    };
    let run = rag_answers(&model, &tok, &facts, &questions, &gold, &cfg, None).unwrap();
    assert_eq!(run.answers.len(), 6);
    assert!(run.retrieved.iter().all(|r| r.len() == 5));
    let at = |k: usize| run.metrics.iter().find(|m| m.k == k).unwrap().recall;
    eprintln!("recall@1 {} @5 {}", at(1), at(5));
    assert!(at(1) <= at(5));
    // Only the top 5 are retrieved: no cut-off above k is claimed.
    let ks: Vec<usize> = run.metrics.iter().map(|m| m.k).collect();
    assert_eq!(ks, [1, 5]);
    assert_eq!(engram_baselines::rag::cutoffs(100), [1, 5, 10, 100]);
    assert_eq!(engram_baselines::rag::cutoffs(2), [1, 2]);
    assert_eq!(engram_baselines::rag::cutoffs(1), [1]);
    assert_eq!(engram_baselines::rag::cutoffs(200), [1, 5, 10, 100, 200]);
    assert!(
        at(5) >= 0.5,
        "original questions share names with their facts"
    );

    let e = rag_answers(
        &model,
        &tok,
        &facts,
        &questions,
        &gold,
        &RagConfig {
            k: 0,
            ..cfg.clone()
        },
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("k = 0"), "{e}");
    let e = rag_answers(&model, &tok, &[], &questions, &gold, &cfg, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
    // Prompts whose answers could run past the window: named with k, before any answer.
    let mut long = cfg.clone();
    long.k = 30;
    long.answer.max_new_tokens = model.config.max_position_embeddings;
    let e = rag_answers(&model, &tok, &facts, &questions, &gold, &long, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("RAG with k = 30") && e.contains("window of 2048") && e.contains("rag_k"),
        "{e}"
    );

    // The dense retriever (tiny BERT) drives the same pipeline.
    let enc =
        engram_baselines::rag::BertEncoder::load(&fixtures().join("tiny-bert"), &Device::flex())
            .unwrap();
    let dense_cfg = RagConfig {
        retriever: Retriever::Dense(&enc),
        ..cfg.clone()
    };
    let dense = rag_answers(&model, &tok, &facts, &questions, &gold, &dense_cfg, None).unwrap();
    assert_eq!(dense.answers.len(), 6);
    assert!(dense.retrieved.iter().all(|r| r.len() == 5));
}
