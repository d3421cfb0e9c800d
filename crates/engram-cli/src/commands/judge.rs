//! `engram judge`: score an answers file (from `engram answer`) with an offline judge or an LLM
//! judge, writing one verdict per answer (with the judge's name and raw output) as JSONL.

use std::path::PathBuf;

use std::path::Path;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use engram_judge::preset::{DEFAULT_CONCURRENCY, DEFAULT_F1_THRESHOLD, DEFAULT_RECALL_THRESHOLD};
use engram_judge::{JudgeItem, JudgePreset};

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
    #[arg(long, default_value_t = DEFAULT_F1_THRESHOLD)]
    pub f1_threshold: f64,
    /// Threshold of the gold-recall judge.
    #[arg(long, default_value_t = DEFAULT_RECALL_THRESHOLD)]
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
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
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
    let preset = match a.judge {
        JudgeKind::ExactMatch => JudgePreset::ExactMatch,
        JudgeKind::TokenF1 => JudgePreset::TokenF1 {
            threshold: a.f1_threshold,
        },
        JudgeKind::GoldRecall => JudgePreset::GoldRecall {
            threshold: a.recall_threshold,
        },
        JudgeKind::Openai => JudgePreset::Openai {
            base_url: a.base_url.clone(),
            model: a.judge_model.clone(),
            api_key_env: a.api_key_env.clone(),
            prompt: a.prompt.display().to_string(),
            cache: Some(a.cache.display().to_string()),
            concurrency: a.concurrency,
        },
    };
    let judge = preset.build(Path::new("."), &a.cache)?;
    for note in judge.notes() {
        eprintln!("{note}");
    }
    let verdicts = judge.judge(&items)?;
    let mut out = String::new();
    for v in &verdicts {
        out.push_str(&serde_json::to_string(v)?);
        out.push('\n');
    }
    engram_io::write_file(&a.out, out.as_bytes())?;
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
