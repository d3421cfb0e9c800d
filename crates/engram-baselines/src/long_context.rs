//! Long context: every fact in the prompt, then the question. The prompts of all questions are
//! tokenized in full, their longest common token prefix is prefilled **once**, and each batch of
//! questions continues from a copy of that KV cache — the answers are those of the per-question
//! prompts (tested), for a fraction of the prefill work. When the prompts exceed the context
//! window (the model's, or a configured cap) the result is NA, not an error.

use std::time::Instant;

use engram_facts::Fact;
use engram_io::Progress;
use engram_io::or_quiet;
use engram_model::{Answer, AnswerConfig, Llama, answers_from, generate, generate_after_prefix};
use engram_tokenizer::{ChatTokenizer, Message};

use crate::error::{BaselineError, Result};
use crate::prompt::{context_message, facts_block};

/// Settings of a long-context run: how to answer, and a context limit below the model's.
#[derive(Debug, Clone, Default)]
pub struct LongContextConfig {
    /// Batching, token limit and stop ids.
    pub answer: AnswerConfig,
    /// Context limit below the model's `max_position_embeddings`, if any.
    pub context_cap: Option<usize>,
}

/// The outcome of a long-context run.
#[derive(Debug, Clone)]
pub enum LongContext {
    /// Every question answered.
    Answered {
        /// One per question, in order.
        answers: Vec<Answer>,
        /// Tokens of the shared prefix (prefilled once).
        prefix_tokens: usize,
        /// Prompt tokens prefilled in all (prefix once + every question's own tokens).
        prefill_tokens: usize,
        /// What per-question prompts would prefill.
        naive_prefill_tokens: usize,
        /// Seconds spent prefilling the shared prefix.
        prefix_secs: f64,
        /// Seconds of the whole run.
        seconds: f64,
    },
    /// The facts do not fit: the longest prompt with its answer, and the window it exceeds.
    NotApplicable {
        /// Tokens of the longest prompt plus the answer's budget (`max_new_tokens`).
        needed: usize,
        /// The window.
        window: usize,
    },
}

/// The full chat prompts of `questions` with every fact in context.
pub fn long_context_prompts(
    tokenizer: &ChatTokenizer,
    facts: &[Fact],
    questions: &[String],
) -> Result<Vec<Vec<u32>>> {
    if facts.is_empty() {
        return Err(BaselineError::Bad("the fact set is empty".into()));
    }
    let refs: Vec<&Fact> = facts.iter().collect();
    let block = facts_block(&refs);
    questions
        .iter()
        .map(|q| Ok(tokenizer.encode_chat_prompt(&[Message::user(context_message(&block, q))])?))
        .collect()
}

fn common_prefix(prompts: &[Vec<u32>]) -> usize {
    let first = &prompts[0];
    let mut n = first.len();
    for p in &prompts[1..] {
        n = n.min(first.iter().zip(p).take_while(|(a, b)| a == b).count());
    }
    // Every row keeps at least one token of its own to prefill.
    n.min(prompts.iter().map(Vec::len).min().unwrap_or(1) - 1)
}

fn window(model: &Llama, cfg: &LongContextConfig) -> usize {
    let w = model.config.max_position_embeddings;
    cfg.context_cap.map_or(w, |c| c.min(w))
}

/// Answers `questions` with every fact in context, prefilling the shared prefix once (a
/// `prefilling` task, then an `answering` one advanced per answer).
pub fn long_context_answers(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    facts: &[Fact],
    questions: &[String],
    cfg: &LongContextConfig,
    progress: Option<&dyn Progress>,
) -> Result<LongContext> {
    let progress = or_quiet(progress);
    if questions.is_empty() {
        return Err(BaselineError::Bad("no questions to answer".into()));
    }
    let model = &*model.for_inference();
    let t0 = Instant::now();
    let prompts = long_context_prompts(tokenizer, facts, questions)?;
    // The longest prompt and its answer's whole budget: an answer cut to the few tokens left
    // in the window would be judged wrong where the method does not apply.
    let needed = prompts.iter().map(Vec::len).max().unwrap_or(0) + cfg.answer.max_new_tokens.max(1);
    let window = window(model, cfg);
    if needed > window {
        return Ok(LongContext::NotApplicable { needed, window });
    }
    let n = common_prefix(&prompts);
    progress.begin(&format!("prefilling the {n}-token shared prefix"), None);
    let tp = Instant::now();
    let prefix = model.prefill(&prompts[0][..n]);
    let prefix_secs = tp.elapsed().as_secs_f64();
    progress.begin("answering on the shared prefix", Some(prompts.len() as u64));
    let mut answers = Vec::with_capacity(prompts.len());
    let gcfg = cfg.answer.generation();
    for chunk in prompts.chunks(cfg.answer.batch_size.max(1)) {
        if let Err(e) = cfg.answer.check_interrupt(answers.len(), prompts.len()) {
            progress.end();
            return Err(e.into());
        }
        let suffixes: Vec<Vec<u32>> = chunk.iter().map(|p| p[n..].to_vec()).collect();
        let g = generate_after_prefix(model, &prefix, &suffixes, &gcfg)?;
        answers.extend(answers_from(tokenizer, &g)?);
        progress.advance(chunk.len() as u64);
    }
    progress.end();
    let naive: usize = prompts.iter().map(Vec::len).sum();
    Ok(LongContext::Answered {
        answers,
        prefix_tokens: n,
        prefill_tokens: n + naive - n * prompts.len(),
        naive_prefill_tokens: naive,
        prefix_secs,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The same answers computed the plain way: every question's full prompt prefilled on its own
/// (for tests and the benchmark). Returns the answers and the seconds taken.
pub fn naive_answers(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    facts: &[Fact],
    questions: &[String],
    cfg: &LongContextConfig,
    progress: Option<&dyn Progress>,
) -> Result<(Vec<Answer>, f64)> {
    let progress = or_quiet(progress);
    let t0 = Instant::now();
    let prompts = long_context_prompts(tokenizer, facts, questions)?;
    let gcfg = cfg.answer.generation();
    progress.begin(
        "answering with per-question prompts",
        Some(prompts.len() as u64),
    );
    let mut answers = Vec::with_capacity(prompts.len());
    for chunk in prompts.chunks(cfg.answer.batch_size.max(1)) {
        let g = generate(model, chunk, &gcfg)?;
        answers.extend(answers_from(tokenizer, &g)?);
        progress.advance(chunk.len() as u64);
    }
    progress.end();
    Ok((answers, t0.elapsed().as_secs_f64()))
}
