//! What a trainer asks between epochs when `eval_every` is set: how well the model answers so
//! far. The trainer only calls it and records the figure; what is asked and how answers are
//! scored belong to the caller (the sweep: greedy exact match on a fixed sample of the trained
//! questions, scored by the judge crate's one exact-match rule).

use engram_model::Llama;

/// Measures a model between epochs. A trainer with `eval_every = N` calls it after every N-th
/// epoch and after the last, on the model as trained so far, and keeps the figure in that
/// epoch's record ([`crate::EpochRecord::exact_match`]): a memorization curve.
pub trait EpochEval {
    /// The figure for `model`, 0–1. An error ends the run with the error named.
    fn measure(&self, model: &Llama) -> std::result::Result<f64, String>;
}
