//! The memorization curve (`eval_every`): between epochs, a LoRA run answers a fixed sample of
//! the questions it trains on (the rephrased ones), greedily, and the share it gets exactly
//! right (the judge crate's one exact-match rule) goes into that epoch's record. A teacher-forced
//! loss can be near zero while `generate()` still errs; the curve shows what the model answers.

use engram_facts::Fact;
use engram_io::Progress;
use engram_judge::exact_match;
use engram_lora::{EpochEval, TrainConfig};
use engram_model::{AnswerConfig, Llama, answer_questions};
use engram_tokenizer::ChatTokenizer;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// The seed of the sample's draw: fixed, so that every rank and replicate of a fact set is
/// measured on the same questions.
pub const SAMPLE_SEED: u64 = 0x00C0_FFEE;

/// The indices (ascending) of a fixed sample of `size` of `n` facts: all of them when
/// `size >= n`.
pub fn sample_indices(n: usize, size: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    if size < n {
        idx.shuffle(&mut StdRng::seed_from_u64(SAMPLE_SEED));
        idx.truncate(size);
        idx.sort_unstable();
    }
    idx
}

/// Greedy exact match on a fixed sample of the trained (rephrased) questions.
pub struct SampleExactMatch<'a> {
    tokenizer: &'a ChatTokenizer,
    questions: Vec<String>,
    answers: Vec<String>,
    cfg: AnswerConfig,
}

impl<'a> SampleExactMatch<'a> {
    /// The evaluator of `size` of `facts` (see [`sample_indices`]), answering with `cfg`.
    pub fn new(
        tokenizer: &'a ChatTokenizer,
        facts: &[Fact],
        size: usize,
        cfg: AnswerConfig,
    ) -> Self {
        let idx = sample_indices(facts.len(), size);
        Self {
            tokenizer,
            questions: idx
                .iter()
                .map(|&i| facts[i].rephrased_question.clone())
                .collect(),
            answers: idx.iter().map(|&i| facts[i].answer.clone()).collect(),
            cfg,
        }
    }

    /// The evaluator a run with `train`'s settings asks for: `None` when `eval_every` is off,
    /// else one of `eval_sample` of `facts`, answering with `cfg`.
    pub fn for_training(
        train: &TrainConfig,
        tokenizer: &'a ChatTokenizer,
        facts: &[Fact],
        cfg: AnswerConfig,
    ) -> Option<Self> {
        (train.eval_every > 0).then(|| Self::new(tokenizer, facts, train.eval_sample_size(), cfg))
    }

    /// Questions in the sample.
    pub fn len(&self) -> usize {
        self.questions.len()
    }

    /// Whether the sample is empty (no facts).
    pub fn is_empty(&self) -> bool {
        self.questions.is_empty()
    }
}

impl EpochEval for SampleExactMatch<'_> {
    fn measure(&self, model: &Llama) -> std::result::Result<f64, String> {
        if self.questions.is_empty() {
            return Err("no facts to ask".into());
        }
        let hits = exact_match_hits(
            model,
            self.tokenizer,
            &self.questions,
            &self.answers,
            &self.cfg,
            None,
        )
        .map_err(|e| e.to_string())?;
        Ok(hits as f64 / self.questions.len() as f64)
    }
}

/// How many of `questions` `model` answers (greedily, with `cfg`) exactly as the gold answer
/// at the same place in `golds` (the judge crate's one exact-match rule).
pub fn exact_match_hits(
    model: &Llama,
    tokenizer: &ChatTokenizer,
    questions: &[String],
    golds: &[String],
    cfg: &AnswerConfig,
    progress: Option<&dyn Progress>,
) -> engram_model::Result<usize> {
    let got = answer_questions(model, tokenizer, questions, cfg, progress)?;
    Ok(got
        .iter()
        .zip(golds)
        .filter(|(a, gold)| exact_match(&a.text, gold))
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_fixed_and_within_range() {
        let a = sample_indices(100, 10);
        assert_eq!(a, sample_indices(100, 10));
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && a[9] < 100);
        assert_ne!(a, (0..10).collect::<Vec<_>>(), "a draw, not the first ten");
        assert_eq!(sample_indices(5, 10), vec![0, 1, 2, 3, 4]);
    }
}
