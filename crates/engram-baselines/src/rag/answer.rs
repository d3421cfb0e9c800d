//! Answering with retrieved facts (BM25 or dense): the top-k facts (best first) in the prompt,
//! then the question; batched greedy generation.

use std::time::Instant;

use engram_facts::Fact;
use engram_io::Progress;
use engram_model::{Answer, AnswerConfig, Llama, answer_prompts};
use engram_tokenizer::{ChatTokenizer, Message};

use crate::error::{BaselineError, Result};
use crate::prompt::{context_message, facts_block};
use crate::rag::bert::BertEncoder;
use crate::rag::bm25::Bm25Index;
use crate::rag::dense::DenseIndex;
use crate::rag::metrics::{RetrievalMetrics, retrieval_metrics};

/// Which retriever ranks the facts.
#[derive(Clone, Copy, Default)]
pub enum Retriever<'a> {
    /// BM25 over rephrased question + answer.
    #[default]
    Bm25,
    /// Cosine similarity of this encoder's sentence embeddings.
    Dense(&'a BertEncoder),
}

impl std::fmt::Debug for Retriever<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Retriever::Bm25 => f.write_str("Bm25"),
            Retriever::Dense(e) => write!(f, "Dense({})", e.origin.display()),
        }
    }
}

/// Settings of a RAG run: how to answer, how many facts to retrieve, and with what.
#[derive(Debug, Clone)]
pub struct RagConfig<'a> {
    /// Batching, token limit and stop ids.
    pub answer: AnswerConfig,
    /// Facts retrieved into each prompt (EnronQA: 100).
    pub k: usize,
    /// The retriever.
    pub retriever: Retriever<'a>,
}

/// Answers, rankings and retrieval quality of a RAG run.
#[derive(Debug, Clone)]
pub struct RagRun {
    /// One per question, in order.
    pub answers: Vec<Answer>,
    /// The retrieved facts of each question (indices, best first).
    pub retrieved: Vec<Vec<usize>>,
    /// Recall/NDCG for the question's own fact at the cut-offs of [`cutoffs`] for `k`.
    pub metrics: Vec<RetrievalMetrics>,
    /// Wall seconds.
    pub seconds: f64,
}

/// The cut-offs a RAG run that retrieves `k` facts measures: those of
/// [`DEFAULT_KS`](crate::rag::benchmark::DEFAULT_KS) (1, 5, 10, 100) below `k`, and `k` itself
/// (EnronQA's k = 100: all four). Only the top `k` are retrieved, so a larger cut-off could not
/// tell more than recall@k.
pub fn cutoffs(k: usize) -> Vec<usize> {
    let mut ks: Vec<usize> = crate::rag::benchmark::DEFAULT_KS
        .into_iter()
        .filter(|&c| c < k)
        .collect();
    ks.push(k);
    ks
}

/// Answers `questions` (whose source facts are `gold[i]`, indices into `facts`) with the top-k
/// facts in the prompt, retrieved by the configured retriever (an `answering` task).
pub fn rag_answers(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    facts: &[Fact],
    questions: &[String],
    gold: &[usize],
    cfg: &RagConfig,
    progress: Option<&dyn Progress>,
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
    let retrieved: Vec<Vec<usize>> = match cfg.retriever {
        Retriever::Bm25 => {
            let index = Bm25Index::new(facts)?;
            questions.iter().map(|q| index.search(q, cfg.k)).collect()
        }
        Retriever::Dense(enc) => {
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
    // Named here, with the setting to change, rather than by the generator's bare "a prompt
    // has N tokens".
    let window = model.config.max_position_embeddings;
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    if longest + cfg.answer.max_new_tokens.max(1) > window {
        return Err(BaselineError::Bad(format!(
            "RAG with k = {}: the longest prompt has {longest} tokens and its answer up to {} \
             more, past the model's window of {window}: lower k (methods.rag_k, --k)",
            cfg.k, cfg.answer.max_new_tokens
        )));
    }
    let answers = answer_prompts(model, tokenizer, &prompts, &cfg.answer, progress)?;
    let metrics = retrieval_metrics(&retrieved, gold, &cutoffs(cfg.k));
    Ok(RagRun {
        answers,
        retrieved,
        metrics,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
