//! One entry point for answering by any method — what a cell of the memorization table
//! compares (the sweep and `engram answer` both call [`answer_by`]): the facts in the weights
//! (the model carries its trained adapters), in the prompt (long context), or in a retriever
//! (RAG). Question `i` asks about fact `i`.

use engram_facts::Fact;
use engram_io::Progress;
use engram_model::{Answer, AnswerConfig, Llama, answer_questions};
use engram_tokenizer::ChatTokenizer;

use crate::error::{BaselineError, Result};
use crate::long_context::{LongContext, LongContextConfig, long_context_answers};
use crate::rag::{RagConfig, RetrievalMetrics, Retriever, rag_answers};

/// How the facts reach the model.
#[derive(Debug, Clone, Copy)]
pub enum Method<'a> {
    /// In the weights: the model already carries its trained adapters.
    Weights,
    /// In the prompt: every fact, prefilled once; NA past the window (or `context_cap`).
    LongContext {
        /// A context limit below the model's window.
        context_cap: Option<usize>,
    },
    /// In a retriever: the top-`k` facts in the prompt.
    Rag {
        /// Facts retrieved per question.
        k: usize,
        /// BM25 or a dense encoder.
        retriever: Retriever<'a>,
    },
}

/// What a method measured besides its answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Measured {
    /// Nothing (answers from the weights).
    Nothing,
    /// Long context: the shared prefix and the prefill work.
    LongContext {
        /// Tokens of the shared prefix (prefilled once).
        prefix_tokens: usize,
        /// Prompt tokens prefilled in all.
        prefill_tokens: usize,
        /// What per-question prompts would prefill.
        naive_prefill_tokens: usize,
    },
    /// Long context that does not fit: no answers.
    NotApplicable {
        /// Tokens of the longest prompt plus the answer's budget (`max_new_tokens`).
        needed: usize,
        /// The window.
        window: usize,
    },
    /// RAG: how well retrieval found each question's own fact.
    Rag {
        /// Recall/NDCG at the cut-offs up to k ([`crate::rag::cutoffs`]).
        retrieval: Vec<RetrievalMetrics>,
    },
}

impl Measured {
    /// Why the method gave no answers, for NA results.
    pub fn na_reason(&self) -> Option<String> {
        match self {
            Measured::NotApplicable { needed, window } => Some(format!(
                "the longest prompt with its answer's budget needs {needed} tokens, the window is {window}"
            )),
            _ => None,
        }
    }
}

/// A method's answers (`None` when it does not apply) and what it measured.
#[derive(Debug, Clone)]
pub struct MethodRun {
    /// One answer per question, in order.
    pub answers: Option<Vec<Answer>>,
    /// The method's own figures.
    pub measured: Measured,
}

/// Answers `questions` (question `i` about fact `i`) by `method`.
pub fn answer_by(
    method: &Method,
    model: &Llama,
    tokenizer: &ChatTokenizer,
    facts: &[Fact],
    questions: &[String],
    cfg: &AnswerConfig,
    progress: Option<&dyn Progress>,
) -> Result<MethodRun> {
    if questions.len() > facts.len() {
        return Err(BaselineError::Bad(format!(
            "{} questions for {} facts: question i asks about fact i",
            questions.len(),
            facts.len()
        )));
    }
    Ok(match *method {
        Method::Weights => MethodRun {
            answers: Some(answer_questions(
                model, tokenizer, questions, cfg, progress,
            )?),
            measured: Measured::Nothing,
        },
        Method::LongContext { context_cap } => {
            let lc = LongContextConfig {
                answer: cfg.clone(),
                context_cap,
            };
            match long_context_answers(model, tokenizer, facts, questions, &lc, progress)? {
                LongContext::Answered {
                    answers,
                    prefix_tokens,
                    prefill_tokens,
                    naive_prefill_tokens,
                    ..
                } => MethodRun {
                    answers: Some(answers),
                    measured: Measured::LongContext {
                        prefix_tokens,
                        prefill_tokens,
                        naive_prefill_tokens,
                    },
                },
                LongContext::NotApplicable { needed, window } => MethodRun {
                    answers: None,
                    measured: Measured::NotApplicable { needed, window },
                },
            }
        }
        Method::Rag { k, retriever } => {
            let rag = RagConfig {
                answer: cfg.clone(),
                k,
                retriever,
            };
            let gold: Vec<usize> = (0..questions.len()).collect();
            let run = rag_answers(model, tokenizer, facts, questions, &gold, &rag, progress)?;
            MethodRun {
                answers: Some(run.answers),
                measured: Measured::Rag {
                    retrieval: run.metrics,
                },
            }
        }
    })
}
