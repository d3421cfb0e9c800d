//! The verified facts of a corpus experiment (`[facts] source = "corpus"`): built from the
//! corpus by QA generation ([`engram_qa::generate_facts`]) as its `[qa]` table says, written to
//! `facts.path`, and reused by every later sweep while nothing that decides them has changed
//! (settings, prompts, generator, judge, the model asked closed-book: the run's settings hash).
//! A fact file from other settings is a named error ([`ExperimentError::StaleFacts`]) until the
//! user asks to rebuild it; an unfinished run resumes from its cached calls.

use std::path::PathBuf;

use engram_io::{Progress, Stop};
use engram_judge::ClientConfig;
use engram_judge::Judge;
use engram_model::{Session, SessionSpec};
use engram_qa::{
    Freshness, Llm, OpenAiLlm, QaPrompts, QaSpec, QaSummary, RunIdentity, freshness, run_dir,
};

use crate::error::{ExperimentError, Result};
use crate::experiment::Experiment;
use crate::local_llm::LocalLlm;
use crate::qa_setup::QaSetup;

/// How the facts came to be ready.
#[derive(Debug, Clone)]
pub enum FactsReady {
    /// Made earlier with these settings: `kept` facts at `path`.
    Reused {
        /// The fact file.
        path: PathBuf,
        /// Facts in it.
        kept: usize,
    },
    /// Generated (or finished) now.
    Built(Box<QaSummary>),
}

/// The experiment's `[qa]` table (a corpus experiment has one: checked at load).
fn setup(exp: &Experiment) -> &QaSetup {
    exp.qa
        .as_ref()
        .expect("a corpus experiment has a [qa] table")
}

/// The fact file a corpus experiment writes and reads.
pub fn facts_path(exp: &Experiment) -> PathBuf {
    exp.relative_to_experiment(exp.facts.path.as_deref().unwrap_or_default())
}

/// The corpus directory it generates from.
pub fn corpus_dir(exp: &Experiment) -> PathBuf {
    exp.relative_to_experiment(exp.facts.corpus.as_deref().unwrap_or_default())
}

/// The name the experiment's own model has as the model asked closed-book.
fn target_name(exp: &Experiment) -> String {
    format!("local:{}", exp.model.source)
}

/// The generator `[qa]` names: an endpoint, or a model loaded here (on the experiment's
/// backend, in its model's dtype).
fn generator(exp: &Experiment, qa: &QaSetup, progress: &dyn Progress) -> Result<Box<dyn Llm>> {
    let s = &qa.section;
    Ok(match s.generator.strip_prefix("local:") {
        Some(model) => Box::new(
            LocalLlm::load(model, &exp.backend, &exp.model.dtype, progress).map_err(|e| {
                ExperimentError::Config {
                    path: exp.path.clone(),
                    message: format!("qa.generator = \"{}\": {e}", s.generator),
                }
            })?,
        ),
        None => {
            let mut client = ClientConfig::new(&s.generator);
            client.api_key_env = s.api_key_env.clone();
            client.timeout = std::time::Duration::from_secs(s.timeout);
            Box::new(OpenAiLlm::new(client, s.model.clone().unwrap_or_default())?)
        }
    })
}

/// The experiment's own model, asked closed-book (the grounded-target check).
fn target(exp: &Experiment, progress: &dyn Progress) -> Result<LocalLlm> {
    let spec = SessionSpec {
        model: exp.model_source(),
        backend: exp.backend.clone(),
        dtype: exp.model.dtype.clone(),
        train: false,
    };
    let session = Session::load(&spec, progress).map_err(|e| ExperimentError::Config {
        path: exp.model_file.clone(),
        message: format!("loading {} as the model asked closed-book: {e}", spec.model),
    })?;
    Ok(LocalLlm::new(&exp.model.source, session))
}

/// The judge of the checks, its cache beside the facts.
fn judge(qa: &QaSetup, facts: &std::path::Path) -> Result<Box<dyn Judge>> {
    Ok(qa
        .judge
        .build(&qa.judge_dir, &run_dir(facts).join("judge-cache"))?)
}

/// Makes the facts of corpus experiment `exp` ready: reuses the fact file when its run had
/// these very settings, else generates it (resuming an unfinished run from its cached calls).
/// A complete fact file from other settings is [`ExperimentError::StaleFacts`] unless
/// `rebuild`; a fact file QA generation did not write is [`ExperimentError::ForeignFacts`].
/// Models are loaded only when something is to be generated.
pub fn prepare_facts(
    exp: &Experiment,
    rebuild: bool,
    stop: &Stop,
    progress: &dyn Progress,
) -> Result<FactsReady> {
    let qa = setup(exp);
    let out = facts_path(exp);
    let prompts = QaPrompts::load(&qa.prompts)?;
    let judge = judge(qa, &out)?;
    let id = RunIdentity {
        cfg: &qa.cfg,
        prompts: &prompts,
        generator: qa.generator_name(),
        target: qa.section.ask_target.then(|| target_name(exp)),
        judge: judge.fingerprint(),
        corpus: engram_qa::corpus_fingerprint(&corpus_dir(exp))?,
    };
    match freshness(&out, &id)? {
        Freshness::Fresh(m) => {
            return Ok(FactsReady::Reused {
                path: out,
                kept: m.kept,
            });
        }
        Freshness::Stale(changed) if !rebuild => {
            return Err(ExperimentError::StaleFacts {
                experiment: exp.path.clone(),
                facts: out,
                changed: changed.join("; "),
            });
        }
        Freshness::Foreign => {
            return Err(ExperimentError::ForeignFacts {
                manifest: run_dir(&out).join("manifest.json"),
                facts: out,
            });
        }
        Freshness::Missing | Freshness::Unfinished | Freshness::Stale(_) => {}
    }
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(ExperimentError::io(dir))?;
    }
    let generator = generator(exp, qa, progress)?;
    let target = match qa.section.ask_target {
        true => Some(target(exp, progress)?),
        false => None,
    };
    let corpus = corpus_dir(exp);
    let spec = QaSpec {
        corpus: &corpus,
        out: &out,
        cfg: &qa.cfg,
        prompts: &prompts,
        generator: generator.as_ref(),
        target: target.as_ref().map(|t| t as &dyn Llm),
        judge: judge.as_ref(),
        judge_endpoint: qa.judge_endpoint(),
        local_only: qa.section.local_only,
    };
    debug_assert_eq!(spec.identity()?.hash(), id.hash(), "one identity");
    let summary = engram_qa::generate_facts(&spec, stop, progress)?;
    for note in judge.notes() {
        progress.note(&note);
    }
    Ok(FactsReady::Built(Box::new(summary)))
}

/// For `--dry-run` before the facts exist: what building them would ask, in lines.
pub fn estimate_lines(exp: &Experiment) -> Result<Vec<String>> {
    let qa = setup(exp);
    let prompts = QaPrompts::load(&qa.prompts)?;
    let (e, unfiltered) =
        engram_qa::estimate_corpus(&corpus_dir(exp), &qa.cfg, &prompts, qa.section.ask_target)?;
    let mut lines = vec![
        format!(
            "building the facts: {} documents of {}{} → {} pair slots, by {}",
            e.documents,
            corpus_dir(exp).display(),
            if unfiltered { " (not filtered)" } else { "" },
            e.pairs,
            qa.section.generator
        ),
        format!(
            "  generator calls {} … {}, prompt tokens (≈ 4 characters a token) {} … {}, judged answers {} … {}",
            e.generator_calls_least,
            e.generator_calls_most,
            e.prompt_tokens.0,
            e.prompt_tokens.1,
            e.judge_calls.0,
            e.judge_calls.1
        ),
    ];
    if qa.section.ask_target {
        lines.push(format!(
            "  calls to {} (closed-book) {} … {}",
            exp.model.source, e.target_calls.0, e.target_calls.1
        ));
    }
    Ok(lines)
}
