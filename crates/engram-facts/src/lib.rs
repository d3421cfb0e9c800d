//! Fact sets: question → answer pairs that a model should memorize or retrieve.
//!
//! Start here: [`read_facts`] reads a fact file — JSONL, one object per line,
//! `{"id": "...", "question": "...", "rephrased_question": "...", "answer": "..."}` (`id`
//! optional: `line-N` by default; `source`, the document the fact came from, optional) — with
//! line-numbered errors; [`nested_samples`] draws the seed-determined samples a sweep's fact
//! counts use. Training uses the rephrased question, evaluation the original one (EnronQA §6).

mod error;
mod fact;
mod jsonl;
mod sample;

pub use error::{FactsError, Result};
pub use fact::{Asked, Fact};
pub use jsonl::{read_facts, write_facts};
pub use sample::{TooFewFacts, nested_samples, sample_order};
