//! `engram qa generate`: verified question–answer facts from a corpus (EnronQA §3.2–3.3), with
//! an OpenAI-compatible endpoint or a model engram runs itself as the generator, an LLM or
//! offline judge, and `--local-only` for text that must not leave the machine.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use engram_experiments::LocalLlm;
use engram_judge::ClientConfig;
use engram_judge::{DEFAULT_BASE_URL, DEFAULT_JUDGE_MODEL, DEFAULT_JUDGE_PROMPT};
use engram_judge::{JudgePreset, VerdictFormat};
use engram_qa::{Llm, OpenAiLlm, QaError, QaFlags, QaPrompts, QaSpec};

use crate::judge_arg::judge_preset;
use crate::loaded::ModelArgs;
use crate::progress::Bars;
use crate::signals::{self, ExitStatus};

/// `engram qa …`.
#[derive(Subcommand, Debug)]
pub enum QaCommand {
    /// Generate verified question–answer facts from a corpus (from `engram corpus ingest` and
    /// `filter`): engram's fact JSONL, and beside it OUT.qa/ with every pair's checks.
    Generate(GenerateArgs),
}

/// Arguments of `engram qa generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The corpus directory.
    pub corpus: PathBuf,
    /// The fact file to write (JSONL); records and caches go to OUT.qa/ beside it.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub settings: QaFlags,
    /// The directory of prompt files (generate.txt, specific.txt, answer.txt, closed_book.txt,
    /// quality.txt, refine.txt, rephrase.txt).
    #[arg(long, default_value = "configs/qa")]
    pub prompts: PathBuf,
    /// The generator: an OpenAI-compatible base URL (http://localhost:8080/v1), or
    /// local:MODEL for a model engram runs itself (a directory, .gguf file or registry alias).
    #[arg(long, default_value = DEFAULT_BASE_URL)]
    pub generator: String,
    /// The generator's model name at its endpoint.
    #[arg(long, default_value = DEFAULT_JUDGE_MODEL)]
    pub model: String,
    /// Environment variable holding the endpoint's API key (never logged or written).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// The judge: a preset file (configs/judges/*.toml), exact-match, token-f1 or gold-recall. Default: an
    /// LLM judge at the generator's endpoint with configs/judges/enronqa-judge.txt.
    #[arg(long)]
    pub judge: Option<String>,
    /// The model the memorization table will train (a directory, .gguf file or registry
    /// alias): a pair it answers correctly without the document is dropped (grounded-target).
    #[arg(long)]
    pub target_model: Option<String>,
    /// Refuse any generator or judge endpoint that is not on this machine.
    #[arg(long)]
    pub local_only: bool,
    /// Print what the run would ask (calls, tokens) and ask nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Per-request timeout of the endpoint, in seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Backend of local models: cpu, wgpu, cuda[:N], auto.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Weight dtype of local models.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
}

/// Runs `engram qa …`.
pub fn run(cmd: QaCommand) -> Result<()> {
    match cmd {
        QaCommand::Generate(a) => run_generate(a),
    }
}

fn local_model(a: &GenerateArgs, model: &str) -> Result<LocalLlm> {
    let args = ModelArgs {
        model: model.to_string(),
        backend: a.backend.clone(),
        dtype: a.dtype.clone(),
    };
    Ok(LocalLlm::new(model, args.load()?))
}

/// The judge preset `--judge` names, with the directory its relative paths start from.
fn judge_of(a: &GenerateArgs) -> Result<(JudgePreset, PathBuf)> {
    match a.judge.as_deref() {
        Some(value) => judge_preset(value),
        None if a.generator.starts_with("local:") => bail!(
            "--generator {} has no endpoint for the default LLM judge: name one with --judge (a preset file such as configs/judges/small-judge.toml on a local server, or exact-match / token-f1)",
            a.generator
        ),
        None => Ok((
            JudgePreset::Openai {
                base_url: a.generator.clone(),
                model: a.model.clone(),
                api_key_env: a.api_key_env.clone(),
                prompt: DEFAULT_JUDGE_PROMPT.into(),
                cache: None,
                concurrency: 1,
                verdict_format: VerdictFormat::Auto,
            },
            PathBuf::from("."),
        )),
    }
}

fn run_generate(a: GenerateArgs) -> Result<()> {
    let cfg = a.settings.settings()?;
    let prompts = QaPrompts::load(&a.prompts)?;
    let (preset, base) = judge_of(&a)?;
    let judge_endpoint = match &preset {
        JudgePreset::Openai { base_url, .. } => Some(base_url.clone()),
        _ => None,
    };
    if a.dry_run {
        let (e, unfiltered) =
            engram_qa::estimate_corpus(&a.corpus, &cfg, &prompts, a.target_model.is_some())?;
        println!(
            "{} documents{} → {} pair slots ({} cut to {} characters)",
            e.documents,
            if unfiltered { " (not filtered)" } else { "" },
            e.pairs,
            e.truncated,
            cfg.max_document_chars
        );
        println!(
            "generator calls: {} if every pair passes at once … {} at most",
            e.generator_calls_least, e.generator_calls_most
        );
        println!(
            "generator prompt tokens (≈ 4 characters a token): {} … {}",
            e.prompt_tokens.0, e.prompt_tokens.1
        );
        println!("judged answers: {} … {}", e.judge_calls.0, e.judge_calls.1);
        if a.target_model.is_some() {
            println!(
                "calls to the model to train: {} … {}",
                e.target_calls.0, e.target_calls.1
            );
        }
        return Ok(());
    }
    let generator: Box<dyn Llm> = match a.generator.strip_prefix("local:") {
        Some(model) => Box::new(local_model(&a, model)?),
        None => {
            let mut client = ClientConfig::new(&a.generator);
            client.api_key_env = a.api_key_env.clone();
            client.timeout = std::time::Duration::from_secs(a.timeout);
            Box::new(OpenAiLlm::new(client, &a.model)?)
        }
    };
    let target = match &a.target_model {
        Some(m) => Some(local_model(&a, m)?),
        None => None,
    };
    let judge = preset.build(&base, &engram_qa::run_dir(&a.out).join("judge-cache"))?;
    let spec = QaSpec {
        corpus: &a.corpus,
        out: &a.out,
        cfg: &cfg,
        prompts: &prompts,
        generator: generator.as_ref(),
        target: target.as_ref().map(|t| t as &dyn Llm),
        judge: judge.as_ref(),
        judge_endpoint,
        local_only: a.local_only,
    };
    let stop = signals::install()?;
    for note in judge.notes() {
        eprintln!("{note}");
    }
    let result = engram_qa::generate_facts(&spec, &stop, &Bars::new(true));
    for note in judge.notes() {
        eprintln!("{note}");
    }
    let dir = engram_qa::run_dir(&a.out);
    let summary = match result {
        Ok(s) => s,
        Err(e @ QaError::Stopped { signal, .. }) => {
            eprintln!("{e} (records in {})", dir.display());
            return Err(ExitStatus(signals::exit_status(signal)).into());
        }
        Err(e) => {
            return Err(e).with_context(|| format!("records so far in {}", dir.display()));
        }
    };
    let m = &summary.manifest;
    println!(
        "{} of {} pairs kept from {} documents → {}",
        m.kept,
        m.pairs,
        m.documents,
        summary.facts.display()
    );
    for (reason, n) in &m.dropped_by_reason {
        println!("  {reason:<22} {n:>6} dropped");
    }
    let g = &m.calls["generator"];
    println!(
        "generator: {} calls asked, {} from the cache, {} + {} tokens; {} answers judged ({} cached)",
        g.asked, g.cached, g.prompt_tokens, g.completion_tokens, m.judged, m.judged_cached
    );
    if let Some(c) = m.llm_calls_per_kept_fact {
        println!("LLM calls per kept fact: {c:.1}");
    }
    println!(
        "every pair's checks: {}",
        summary.dir.join("checks.jsonl").display()
    );
    Ok(())
}
