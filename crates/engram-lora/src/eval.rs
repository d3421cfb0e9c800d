//! Batched greedy answers to questions (the evaluation helper of the trainer and the sweeps):
//! each question becomes the chat prompt the model was trained with, prompts of similar length
//! share a batch, and answers come back in the questions' order.

use engram_model::{Generation, GenerationConfig, Llama, Sampling, generate};
use engram_tokenizer::ChatTokenizer;
use indicatif::ProgressBar;

use crate::error::Result;
use crate::examples::question_prompt;

/// How to answer.
#[derive(Debug, Clone)]
pub struct AnswerConfig {
    /// Questions per generation batch.
    pub batch_size: usize,
    /// Most new tokens per answer.
    pub max_new_tokens: usize,
    /// Ids that end an answer.
    pub stop_ids: Vec<u32>,
}

/// One answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Decoded text, special tokens skipped.
    pub text: String,
    /// Generated tokens (stop id excluded).
    pub tokens: usize,
    /// Whether the model ended the answer itself.
    pub stopped: bool,
}

/// Greedy answers to `questions` with whatever adapters `model` carries, each asked through
/// the chat prompt the model was trained with.
pub fn answer_questions(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    questions: &[String],
    cfg: &AnswerConfig,
    progress: Option<&ProgressBar>,
) -> Result<Vec<Answer>> {
    let prompts = questions
        .iter()
        .map(|q| question_prompt(tokenizer, q))
        .collect::<Result<Vec<_>>>()?;
    answer_prompts(model, tokenizer, &prompts, cfg, progress)
}

/// Greedy answers to ready-made prompts; prompts of similar length share a batch, answers come
/// back in the prompts' order. A model on an autodiff device answers through its validation copy.
pub fn answer_prompts(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    prompts: &[Vec<u32>],
    cfg: &AnswerConfig,
    progress: Option<&ProgressBar>,
) -> Result<Vec<Answer>> {
    let model = model.for_inference();
    let mut order: Vec<usize> = (0..prompts.len()).collect();
    order.sort_by_key(|&i| prompts[i].len());
    let gen_cfg = GenerationConfig {
        max_new_tokens: cfg.max_new_tokens,
        sampling: Sampling::Greedy,
        stop_ids: cfg.stop_ids.clone(),
    };
    let mut answers: Vec<Option<Answer>> = vec![None; prompts.len()];
    for chunk in order.chunks(cfg.batch_size.max(1)) {
        let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| prompts[i].clone()).collect();
        let out = generate(&model, &batch, &gen_cfg)?;
        for (&i, a) in chunk.iter().zip(answers_from(tokenizer, &out)?) {
            answers[i] = Some(a);
        }
        if let Some(p) = progress {
            p.inc(chunk.len() as u64);
        }
    }
    Ok(answers
        .into_iter()
        .map(|a| a.expect("every prompt answered"))
        .collect())
}

/// The decoded answers of one generation call, in its rows' order.
pub fn answers_from(tokenizer: &ChatTokenizer, g: &Generation) -> Result<Vec<Answer>> {
    g.tokens
        .iter()
        .zip(&g.stopped)
        .map(|(t, &stopped)| {
            Ok(Answer {
                text: tokenizer.decode(t, true)?,
                tokens: t.len(),
                stopped,
            })
        })
        .collect()
}

/// The answer as compared: surrounding whitespace removed.
pub fn normalize_answer(s: &str) -> &str {
    s.trim()
}

/// Exact match after [`normalize_answer`] (the peer harness's metric).
pub fn exact_match(answer: &str, gold: &str) -> bool {
    normalize_answer(answer) == normalize_answer(gold)
}
