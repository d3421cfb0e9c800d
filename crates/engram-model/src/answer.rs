//! Batched greedy answers to questions — what every method ends in (LoRA evaluation, long
//! context, RAG): each question becomes the chat prompt the model was trained with (user turn,
//! generation header open), prompts of similar length share a batch, and answers come back in
//! the questions' order.

use engram_io::Progress;
use engram_tokenizer::{ChatTokenizer, Message};
use serde::{Deserialize, Serialize};

use crate::cpu_matmul::QuantizedProduct;
use crate::error::{ModelError, Result};
use crate::generate::{Generation, GenerationConfig, generate};
use crate::llama::Llama;
use crate::sampling::Sampling;

/// How questions are answered (an experiment's `[answer]` table; the stop ids come from the
/// tokenizer, not from files). Defaults: batches of 8, at most 32 new tokens, exact products.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnswerConfig {
    /// Questions per generation batch.
    pub batch_size: usize,
    /// Most new tokens per answer.
    pub max_new_tokens: usize,
    /// How the CPU multiplies by a GGUF checkpoint's quantized blocks while answering:
    /// `"exact"` (the default: the dequantized weights' products, transformers' numbers) or
    /// `"q8"` (llama.cpp's integer dot products at batch ≤ 4: faster, an approximation whose
    /// greedy answers can differ). Left out of a configuration's serialized form when exact, so
    /// that the results of files that never set it keep their hashes.
    #[serde(skip_serializing_if = "QuantizedProduct::is_exact")]
    pub matmul: QuantizedProduct,
    /// Ids that end an answer.
    #[serde(skip)]
    pub stop_ids: Vec<u32>,
    /// A request to stop answering between batches (a signal); not part of a configuration.
    #[serde(skip)]
    pub interrupt: engram_io::Stop,
}

impl Default for AnswerConfig {
    fn default() -> Self {
        Self {
            batch_size: 8,
            max_new_tokens: 32,
            matmul: QuantizedProduct::Exact,
            stop_ids: Vec::new(),
            interrupt: engram_io::Stop::new(),
        }
    }
}

impl AnswerConfig {
    /// [`ModelError::Stopped`] if [`AnswerConfig::interrupt`] was requested, with `answered`
    /// of `total` answers made; answering loops call it between batches.
    pub fn check_interrupt(&self, answered: usize, total: usize) -> Result<()> {
        match self.interrupt.requested() {
            Some(signal) => Err(ModelError::Stopped {
                signal,
                answered,
                total,
            }),
            None => Ok(()),
        }
    }

    /// Greedy generation with these limits and stop ids.
    pub fn generation(&self) -> GenerationConfig {
        GenerationConfig {
            max_new_tokens: self.max_new_tokens,
            sampling: Sampling::Greedy,
            stop_ids: self.stop_ids.clone(),
            matmul: self.matmul,
        }
    }
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

/// The chat prompt (generation header open) of one question, as the model sees it both in
/// training and when answering.
pub fn question_prompt(tokenizer: &ChatTokenizer, question: &str) -> Result<Vec<u32>> {
    Ok(tokenizer.encode_chat_prompt(&[Message::user(question)])?)
}

/// Greedy answers to `questions` with whatever adapters `model` carries, each asked through
/// the chat prompt the model was trained with.
pub fn answer_questions(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    questions: &[String],
    cfg: &AnswerConfig,
    progress: Option<&dyn Progress>,
) -> Result<Vec<Answer>> {
    let prompts = questions
        .iter()
        .map(|q| question_prompt(tokenizer, q))
        .collect::<Result<Vec<_>>>()?;
    answer_prompts(model, tokenizer, &prompts, cfg, progress)
}

/// Greedy answers to ready-made prompts; prompts of similar length share a batch, answers come
/// back in the prompts' order (one `answering` task, advanced per answer). A model on an
/// autodiff device answers through its validation copy.
pub fn answer_prompts(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    prompts: &[Vec<u32>],
    cfg: &AnswerConfig,
    progress: Option<&dyn Progress>,
) -> Result<Vec<Answer>> {
    let progress = engram_io::or_quiet(progress);
    let model = model.for_inference();
    let mut order: Vec<usize> = (0..prompts.len()).collect();
    order.sort_by_key(|&i| prompts[i].len());
    let gen_cfg = cfg.generation();
    progress.begin("answering", Some(prompts.len() as u64));
    let mut answers: Vec<Option<Answer>> = vec![None; prompts.len()];
    let mut answered = 0;
    for chunk in order.chunks(cfg.batch_size.max(1)) {
        if let Err(e) = cfg.check_interrupt(answered, prompts.len()) {
            progress.end();
            return Err(e);
        }
        answered += chunk.len();
        let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| prompts[i].clone()).collect();
        let out = generate(&model, &batch, &gen_cfg)?;
        for (&i, a) in chunk.iter().zip(answers_from(tokenizer, &out)?) {
            answers[i] = Some(a);
        }
        progress.advance(chunk.len() as u64);
    }
    progress.end();
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
