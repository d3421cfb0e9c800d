//! Answering with retrieved facts (BM25 or dense): the top-k facts (best first) in the prompt,
//! then the question; batched greedy generation.

use std::time::Instant;

use engram_facts::Fact;
use engram_lora::{Answer, AnswerConfig, answer_prompts};
use engram_model::Llama;
use engram_tokenizer::{ChatTokenizer, Message};

use crate::error::{BaselineError, Result};
use crate::prompt::{context_message, facts_block};
use crate::rag::bert::BertEncoder;
use crate::rag::bm25::Bm25Index;
use crate::rag::dense::DenseIndex;
use crate::rag::metrics::{RetrievalMetrics, retrieval_metrics};

/// Settings of a RAG run.
#[derive(Debug, Clone)]
pub struct RagConfig {
    /// Facts retrieved into each prompt (EnronQA: 100).
    pub k: usize,
    /// Questions per generation batch.
    pub batch_size: usize,
    /// Most new tokens per answer.
    pub max_new_tokens: usize,
    /// Ids that end an answer.
    pub stop_ids: Vec<u32>,
    /// A bar advanced by one per answered question.
    pub progress: Option<indicatif::ProgressBar>,
}

/// Answers, rankings and retrieval quality of a RAG run.
#[derive(Debug, Clone)]
pub struct RagRun {
    /// One per question, in order.
    pub answers: Vec<Answer>,
    /// The retrieved facts of each question (indices, best first).
    pub retrieved: Vec<Vec<usize>>,
    /// Recall/NDCG at 1, 5, 10, 100 for the question's own fact.
    pub metrics: Vec<RetrievalMetrics>,
    /// Wall seconds.
    pub seconds: f64,
}

/// Answers `questions` (whose source facts are `gold[i]`, indices into `facts`) with the top-k
/// facts in the prompt, retrieved by BM25, or by the dense `encoder` when one is given.
pub fn rag_answers(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    facts: &[Fact],
    questions: &[String],
    gold: &[usize],
    cfg: &RagConfig,
    encoder: Option<&BertEncoder>,
) -> Result<RagRun> {
    if cfg.k == 0 {
        return Err(BaselineError::Bad(
            "RAG needs k ≥ 1 retrieved facts (got k = 0)".into(),
        ));
    }
    if questions.len() != gold.len() {
        return Err(BaselineError::Bad(
            "one gold fact per question is needed".into(),
        ));
    }
    let t0 = Instant::now();
    let retrieved: Vec<Vec<usize>> = match encoder {
        None => {
            let index = Bm25Index::new(facts)?;
            questions.iter().map(|q| index.search(q, cfg.k)).collect()
        }
        Some(enc) => {
            let index = DenseIndex::new(enc, facts, 32)?;
            questions
                .iter()
                .map(|q| index.search(enc, q, cfg.k))
                .collect::<Result<_>>()?
        }
    };
    let prompts = questions
        .iter()
        .zip(&retrieved)
        .map(|(q, r)| {
            let top: Vec<&Fact> = r.iter().map(|&i| &facts[i]).collect();
            Ok(tokenizer
                .encode_chat_prompt(&[Message::user(context_message(&facts_block(&top), q))])?)
        })
        .collect::<Result<Vec<_>>>()?;
    let answer_cfg = AnswerConfig {
        batch_size: cfg.batch_size,
        max_new_tokens: cfg.max_new_tokens,
        stop_ids: cfg.stop_ids.clone(),
    };
    let answers = answer_prompts(
        model,
        tokenizer,
        &prompts,
        &answer_cfg,
        cfg.progress.as_ref(),
    )?;
    let metrics = retrieval_metrics(&retrieved, gold, &[1, 5, 10, 100]);
    Ok(RagRun {
        answers,
        retrieved,
        metrics,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
