//! `engram judge`: score an answers file (from `engram answer`) with an offline judge or an LLM
//! judge, writing one verdict per answer (with the judge's name and raw output) as JSONL.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use engram_judge::cache::JudgeCache;
use engram_judge::{
    ExactMatchJudge, GoldRecallJudge, Judge, JudgeItem, JudgePrompt, OpenAiJudge,
    OpenAiJudgeConfig, TokenF1Judge,
};

/// Which judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JudgeKind {
    /// Offline: normalized exact match.
    ExactMatch,
    /// Offline: token F1 ≥ --f1-threshold.
    TokenF1,
    /// Offline: the answer holds every token of the gold answer (token recall ≥ --recall-threshold).
    GoldRecall,
    /// An LLM over an OpenAI-compatible endpoint.
    Openai,
}

/// Arguments of `engram judge`.
#[derive(Args, Debug)]
pub struct JudgeArgs {
    /// Answers (JSONL from `engram answer`).
    #[arg(long)]
    pub answers: PathBuf,
    /// Where to write the verdicts (JSONL).
    #[arg(long)]
    pub out: PathBuf,
    /// The judge.
    #[arg(long, value_enum, default_value = "token-f1")]
    pub judge: JudgeKind,
    /// Threshold of the token-F1 judge.
    #[arg(long, default_value_t = 0.5)]
    pub f1_threshold: f64,
    /// Threshold of the gold-recall judge.
    #[arg(long, default_value_t = 1.0)]
    pub recall_threshold: f64,
    /// OpenAI-compatible base URL (e.g. http://localhost:8000/v1).
    #[arg(long, default_value = "http://localhost:8000/v1")]
    pub base_url: String,
    /// Judge model.
    #[arg(long, default_value = "meta-llama/Llama-3.1-70B-Instruct")]
    pub judge_model: String,
    /// Environment variable that holds the API key (never logged).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// The judge prompt file.
    #[arg(long, default_value = "configs/judges/enronqa-judge.txt")]
    pub prompt: PathBuf,
    /// The persistent judge cache.
    #[arg(long, default_value = "results/judge-cache.jsonl")]
    pub cache: PathBuf,
    /// Requests in flight.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
}

/// Runs `engram judge`.
pub fn run(a: JudgeArgs) -> Result<()> {
    let text =
        std::fs::read_to_string(&a.answers).with_context(|| a.answers.display().to_string())?;
    let mut items = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", a.answers.display(), i + 1))?;
        let field = |k: &str| -> Result<String> {
            v[k].as_str()
                .map(str::to_string)
                .with_context(|| format!("{}:{}: missing `{k}`", a.answers.display(), i + 1))
        };
        items.push(JudgeItem {
            id: field("id")?,
            question: field("question")?,
            gold: field("gold")?,
            answer: v["answer"].as_str().map(str::to_string),
            document: v["document"].as_str().map(str::to_string),
        });
    }
    let judge: Box<dyn Judge> = match a.judge {
        JudgeKind::ExactMatch => Box::new(ExactMatchJudge),
        JudgeKind::TokenF1 => Box::new(TokenF1Judge {
            threshold: a.f1_threshold,
        }),
        JudgeKind::GoldRecall => Box::new(GoldRecallJudge {
            threshold: a.recall_threshold,
        }),
        JudgeKind::Openai => {
            let mut cfg = OpenAiJudgeConfig::new(&a.base_url, &a.judge_model);
            cfg.api_key_env = a.api_key_env.clone();
            cfg.concurrency = a.concurrency;
            let cache = JudgeCache::open(&a.cache)?;
            if cache.corrupt_lines > 0 {
                eprintln!(
                    "{}: {} corrupt lines skipped (they will be asked again)",
                    a.cache.display(),
                    cache.corrupt_lines
                );
            }
            Box::new(OpenAiJudge::new(cfg, JudgePrompt::load(&a.prompt)?, cache)?)
        }
    };
    let verdicts = judge.judge(&items)?;
    let mut out = String::new();
    for v in &verdicts {
        out.push_str(&serde_json::to_string(v)?);
        out.push('\n');
    }
    engram_lora::atomic::write_file(&a.out, out.as_bytes())?;
    let judged = verdicts.iter().filter(|v| v.correct.is_some()).count();
    let correct = verdicts.iter().filter(|v| v.correct == Some(true)).count();
    println!(
        "{}: {correct}/{} correct ({} without a verdict) → {}",
        judge.name(),
        verdicts.len(),
        verdicts.len() - judged,
        a.out.display()
    );
    Ok(())
}
