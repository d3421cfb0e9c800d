//! What a run will ask before it asks anything (`engram qa generate --dry-run`): LLM and judge
//! calls and prompt tokens when every pair passes at once (the least) and when every pair uses
//! every refinement round and every rephrasing try (the most), prompt tokens estimated at 4
//! characters a token over the prompt templates and the documents as they will be cut.

use serde::Serialize;

use crate::config::QaConfig;
use crate::context::cut;
use crate::llm::estimate_tokens;
use crate::prompts::{Prompt, QaPrompts};

/// Calls and tokens, least and most.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// Documents.
    pub documents: usize,
    /// Pair slots (documents × questions per document).
    pub pairs: usize,
    /// Generator calls if every pair passes at once.
    pub generator_calls_least: u64,
    /// Generator calls if every pair uses every round and every try.
    pub generator_calls_most: u64,
    /// Calls to the model to train (closed-book), least and most.
    pub target_calls: (u64, u64),
    /// Answers judged, least and most.
    pub judge_calls: (u64, u64),
    /// Generator prompt tokens, least and most.
    pub prompt_tokens: (u64, u64),
    /// Documents longer than `max_document_chars` (cut in the prompts).
    pub truncated: usize,
}

fn template_tokens(p: &Prompt) -> u64 {
    estimate_tokens(&p.user) + p.system.as_deref().map_or(0, estimate_tokens)
}

/// The estimate for `documents` (their texts) under `cfg`; `target` when the model to train is
/// asked too.
pub fn estimate(documents: &[&str], cfg: &QaConfig, prompts: &QaPrompts, target: bool) -> Estimate {
    let pairs = (documents.len() * cfg.questions_per_document) as u64;
    let n_obj = cfg.objective_answers as u64;
    let t = u64::from(target);
    let trials = cfg.specific_trials as u64;
    // One round: specific (one call a listing), objective n, closed-book 1, quality 1 (+ the
    // generation itself).
    let checks_calls = trials + 2 + n_obj;
    let judge_per_round = n_obj + 1 + t;
    let rounds = cfg.refine_rounds as u64 + 1;
    let tries = cfg.rephrase_tries as u64;
    let excerpt = estimate_tokens(&"x".repeat(cfg.excerpt_chars))
        * (cfg.similar_documents as u64 + 1)
        * trials;
    let mut doc_tokens = 0u64;
    let mut truncated = 0;
    for d in documents {
        let (text, cut_) = cut(d, cfg.max_document_chars);
        truncated += usize::from(cut_);
        doc_tokens += estimate_tokens(&text) * cfg.questions_per_document as u64;
    }
    // Prompt tokens of one round's calls beyond the documents' own.
    let fixed_round = template_tokens(&prompts.generate)
        + trials * template_tokens(&prompts.specific)
        + excerpt
        + n_obj * template_tokens(&prompts.answer)
        + template_tokens(&prompts.closed_book)
        + template_tokens(&prompts.quality);
    // Documents appear in generation, each objective answer and the quality rubric.
    let doc_round = 2 + n_obj;
    let rephrase_try = template_tokens(&prompts.rephrase) + template_tokens(&prompts.answer);
    let least_tokens = doc_tokens * (doc_round + 1) + pairs * (fixed_round + rephrase_try);
    let most_tokens = doc_tokens * (doc_round * rounds + tries)
        + pairs * (fixed_round * rounds + rephrase_try * tries);
    Estimate {
        documents: documents.len(),
        pairs: pairs as usize,
        generator_calls_least: pairs * (1 + checks_calls + 2),
        generator_calls_most: pairs * (rounds * (1 + checks_calls) + 2 * tries),
        target_calls: (pairs * t, pairs * t * rounds),
        judge_calls: (
            pairs * (judge_per_round + 1),
            pairs * (judge_per_round * rounds + tries),
        ),
        prompt_tokens: (least_tokens, most_tokens),
        truncated,
    }
}

/// [`estimate`] over the documents QA generation would read from `corpus` (as
/// [`crate::run::corpus_documents`] gives them, `cfg.max_documents` applied); `true` when the
/// corpus was never filtered.
pub fn estimate_corpus(
    corpus: &std::path::Path,
    cfg: &QaConfig,
    prompts: &QaPrompts,
    target: bool,
) -> crate::error::Result<(Estimate, bool)> {
    let (docs, unfiltered) = crate::run::corpus_documents(corpus)?;
    let take = cfg.documents_used(docs.len());
    let texts: Vec<&str> = docs[..take].iter().map(|d| d.text.as_str()).collect();
    Ok((estimate(&texts, cfg, prompts, target), unfiltered))
}
