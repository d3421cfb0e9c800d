//! Batched greedy answers to questions (the evaluation helper of the trainer and the sweeps):
//! each question becomes the chat prompt the model was trained with, prompts of similar length
//! share a batch, and answers come back in the questions' order.

use burn::module::Module;
use engram_model::{GenerationConfig, Llama, Sampling, generate};
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

/// Greedy answers to `questions` with whatever adapters `model` carries. A model on an
/// autodiff device is answered through its validation copy (no dropout, no graph).
pub fn answer_questions(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    questions: &[String],
    cfg: &AnswerConfig,
    progress: Option<&ProgressBar>,
) -> Result<Vec<Answer>> {
    let valid;
    let model = if model.device().is_autodiff() {
        valid = model.valid();
        &valid
    } else {
        model
    };
    let prompts = questions
        .iter()
        .map(|q| question_prompt(tokenizer, q))
        .collect::<Result<Vec<_>>>()?;
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
        let out = generate(model, &batch, &gen_cfg)?;
        for (k, &i) in chunk.iter().enumerate() {
            answers[i] = Some(Answer {
                text: tokenizer.decode(&out.tokens[k], true)?,
                tokens: out.tokens[k].len(),
                stopped: out.stopped[k],
            });
        }
        if let Some(p) = progress {
            p.inc(chunk.len() as u64);
        }
    }
    Ok(answers
        .into_iter()
        .map(|a| a.expect("every question answered"))
        .collect())
}

/// The answer as compared: surrounding whitespace removed.
pub fn normalize_answer(s: &str) -> &str {
    s.trim()
}

/// Exact match after [`normalize_answer`] (the peer harness's metric).
pub fn exact_match(answer: &str, gold: &str) -> bool {
    normalize_answer(answer) == normalize_answer(gold)
}
