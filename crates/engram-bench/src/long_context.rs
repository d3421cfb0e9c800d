//! `engram bench long-context`: prefill work and time of the long-context baseline with the
//! shared-prefix KV cache vs per-question prompts, on the same facts and questions.

use std::path::PathBuf;

use anyhow::{Result, bail};
use engram_baselines::long_context_prompts;
use engram_baselines::{LongContext, LongContextConfig, long_context_answers, naive_answers};
use engram_facts::read_facts;
use engram_io::Progress;
use engram_model::{AnswerConfig, Session};

use crate::Out;

/// What `engram bench long-context` measures on a loaded model (its arguments, besides the
/// model's).
#[derive(clap::Args, Debug)]
pub struct LongContextBench {
    /// The backend the model is on, for the title (not a flag: the caller sets it from the
    /// model's `--backend`).
    #[arg(skip)]
    pub backend: String,
    /// Facts to put in context.
    #[arg(long, default_value = "tests/fixtures/facts/synthetic-500.jsonl")]
    pub facts: PathBuf,
    /// Facts in context (default: as many as fit the window, at most 1000).
    #[arg(long)]
    pub count: Option<usize>,
    /// Questions answered (the first N facts' original questions).
    #[arg(long, default_value_t = 16)]
    pub questions: usize,
    /// Questions per generation batch.
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// New tokens per answer.
    #[arg(long, default_value_t = 16)]
    pub max_new_tokens: usize,
}

/// Answers the questions with the shared-prefix cache and with per-question prompts, and hands
/// the comparison to `out`.
pub fn long_context(
    loaded: &Session,
    a: &LongContextBench,
    progress: &dyn Progress,
    out: Out,
) -> Result<()> {
    let all = read_facts(&a.facts)?;
    let window = loaded.model.config.max_position_embeddings;
    let probe = |n: usize| -> Result<usize> {
        let q = vec![all[0].question.clone()];
        Ok(long_context_prompts(&loaded.tokenizer, &all[..n], &q)?[0].len() + a.max_new_tokens)
    };
    let count = match a.count {
        Some(n) => n.min(all.len()),
        None => {
            // The largest count whose prompt (+ answer budget) fits the window.
            let (mut lo, mut hi) = (1usize, all.len().min(1000));
            if probe(lo)? > window {
                bail!("not even one fact fits the {window}-token window");
            }
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if probe(mid)? <= window {
                    lo = mid
                } else {
                    hi = mid - 1
                }
            }
            lo
        }
    };
    let facts = &all[..count];
    let questions: Vec<String> = facts
        .iter()
        .take(a.questions)
        .map(|f| f.question.clone())
        .collect();
    let cfg = LongContextConfig {
        answer: AnswerConfig {
            batch_size: a.batch_size,
            max_new_tokens: a.max_new_tokens,
            stop_ids: loaded.stop_ids.clone(),
            ..Default::default()
        },
        context_cap: None,
    };
    let LongContext::Answered {
        answers,
        prefix_tokens,
        prefill_tokens,
        naive_prefill_tokens,
        prefix_secs,
        seconds,
    } = long_context_answers(
        &loaded.model,
        &loaded.tokenizer,
        facts,
        &questions,
        &cfg,
        Some(progress),
    )?
    else {
        bail!("{count} facts do not fit the {window}-token window");
    };
    let (naive, naive_secs) = naive_answers(
        &loaded.model,
        &loaded.tokenizer,
        facts,
        &questions,
        &cfg,
        Some(progress),
    )?;
    let same = answers.iter().zip(&naive).filter(|(x, y)| x == y).count();
    say!(
        out,
        "engram bench long-context: {} on {}, {count} facts in context, {} questions, batch {}, {} new tokens",
        loaded.origin,
        a.backend,
        questions.len(),
        a.batch_size,
        a.max_new_tokens
    );
    say!(
        out,
        "shared prefix: {prefix_tokens} tokens, prefilled once in {prefix_secs:.1}s"
    );
    say!(
        out,
        "prefill tokens: shared {prefill_tokens} vs per-question {naive_prefill_tokens} ({:.3} of the naive work)",
        prefill_tokens as f64 / naive_prefill_tokens as f64
    );
    say!(
        out,
        "wall time (prefill + answers): shared {seconds:.1}s vs per-question {naive_secs:.1}s ({:.2}x faster)",
        naive_secs / seconds
    );
    say!(
        out,
        "answers identical to the per-question prompts: {same}/{}",
        questions.len()
    );
    Ok(())
}
