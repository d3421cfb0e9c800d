//! `engram rag-bench --reader …`: reader accuracy over the retrieved documents (EnronQA Table
//! 4's shape) — each question answered closed-book, from each retriever's top-k documents and
//! from its own source document (the oracle), by an endpoint or a model engram runs itself, and
//! judged; calls cached under `--reader-cache`.

use std::path::PathBuf;

use anyhow::{Result, bail};
use engram_baselines::rag::benchmark::{BenchDoc, BenchQuery, RetrieverScores};
use engram_experiments::local_llm::LocalLlm;
use engram_judge::ClientConfig;
use engram_judge::JudgeCache;
use engram_qa::{
    Condition, ReaderPrompts, ReaderQuestion, ReaderScore, ReaderSettings, read_and_judge,
};
use engram_qa::{Llm, OpenAiLlm};

use super::RagBenchArgs;
use crate::judge_arg::judge_preset;
use crate::progress::Bars;
use crate::signals;

/// The reader `--reader` names.
fn reader(a: &RagBenchArgs, value: &str, bars: &Bars) -> Result<Box<dyn Llm>> {
    Ok(match value.strip_prefix("local:") {
        Some(model) => Box::new(LocalLlm::load(model, &a.backend, "f32", bars)?),
        None => {
            let Some(model) = &a.reader_model else {
                bail!("--reader {value} needs --reader-model (the model name at that endpoint)");
            };
            let mut client = ClientConfig::new(value);
            client.api_key_env = a.api_key_env.clone();
            Box::new(OpenAiLlm::new(client, model)?)
        }
    })
}

/// The conditions: closed-book, each retriever at each `--reader-k`, the oracle.
fn conditions(
    a: &RagBenchArgs,
    scores: &[RetrieverScores],
    queries: &[BenchQuery],
) -> Result<Vec<Condition>> {
    let deepest = a.k.iter().copied().max().unwrap_or(0);
    let mut out = vec![Condition {
        name: "closed-book".into(),
        documents: None,
    }];
    for s in scores {
        for &k in &a.reader_k {
            if k == 0 || k > deepest {
                bail!("--reader-k {k}: must be between 1 and the deepest --k ({deepest})");
            }
            out.push(Condition {
                name: format!("{}@{k}", s.retriever),
                documents: Some(
                    s.rankings
                        .iter()
                        .map(|r| r.iter().copied().take(k).collect())
                        .collect(),
                ),
            });
        }
    }
    out.push(Condition {
        name: "oracle".into(),
        documents: Some(queries.iter().map(|q| vec![q.relevant]).collect()),
    });
    Ok(out)
}

/// Answers and judges every condition; the accuracy per condition.
pub fn run(
    a: &RagBenchArgs,
    value: &str,
    docs: &[BenchDoc],
    queries: &[BenchQuery],
    answers: &[String],
    scores: &[RetrieverScores],
    bars: &Bars,
) -> Result<Vec<ReaderScore>> {
    let Some(judge_value) = &a.judge else {
        bail!(
            "--reader needs --judge (exact-match, token-f1, gold-recall or a preset file such as configs/judges/small-judge.toml)"
        );
    };
    let conditions = conditions(a, scores, queries)?;
    let prompts = ReaderPrompts::load(&a.prompts)?;
    let cache_dir: PathBuf = a
        .reader_cache
        .clone()
        .unwrap_or_else(|| a.corpus.join("reader-cache"));
    let cache = JudgeCache::open_shared(&cache_dir.join("calls"))?;
    let (preset, base) = judge_preset(judge_value)?;
    let judge = preset.build(&base, &cache_dir.join("judge"))?;
    let llm = reader(a, value, bars)?;
    let texts: Vec<String> = docs.iter().map(BenchDoc::indexed).collect();
    let questions: Vec<ReaderQuestion> = queries
        .iter()
        .zip(answers)
        .map(|(q, answer)| ReaderQuestion {
            id: q.id.clone(),
            question: q.text.clone(),
            answer: answer.clone(),
        })
        .collect();
    let settings = ReaderSettings {
        max_tokens: a.reader_max_tokens,
        ..ReaderSettings::default()
    };
    let stop = signals::install()?;
    let (scores, calls) = read_and_judge(
        &texts,
        &questions,
        &conditions,
        &prompts,
        &settings,
        llm.as_ref(),
        &cache,
        judge.as_ref(),
        &stop,
        bars,
    )?;
    for note in judge.notes() {
        eprintln!("{note}");
    }
    println!(
        "reader {} on {} questions ({} calls asked, {} from the cache in {}), judged by {}:",
        llm.model(),
        questions.len(),
        calls.asked,
        calls.cached,
        cache_dir.display(),
        judge.name()
    );
    println!("{:<34} {:>9} {:>9}", "condition", "accuracy", "correct");
    for s in &scores {
        println!(
            "{:<34} {:>9.3} {:>5}/{:<3}",
            s.condition, s.accuracy, s.correct, s.questions
        );
    }
    Ok(scores)
}
