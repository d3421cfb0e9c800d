//! One run of `engram qa generate`: the corpus's documents read, `--local-only` enforced before
//! anything is sent, the stages run ([`crate::pipeline`]), and the results written beside the
//! fact file `OUT` (`facts.jsonl`):
//!
//! - `OUT` — engram's fact JSONL (`id`, `question`, `rephrased_question`, `answer`, `source`),
//!   written only when every document is finished;
//! - `OUT.qa/checks.jsonl` — every pair slot: kept or dropped with its reason, each round's pair
//!   and check outcomes, each rephrasing tried;
//! - `OUT.qa/manifest.json` — settings and their hash, counts by reason, calls and tokens per
//!   LLM, judge calls, LLM calls per kept fact;
//! - `OUT.qa/sent.jsonl` — appended each run: which documents' text went to which endpoint, in
//!   which stages (calls answered from the cache send nothing and are not logged);
//! - `OUT.qa/cache/` — every LLM call (the judge keeps its own cache, by default
//!   `OUT.qa/judge-cache/`).
//!
//! `OUT` and `checks.jsonl` are the same bytes on every rerun with the same settings.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use engram_corpus::{Corpus, Document};
use engram_facts::Fact;
use engram_io::{Progress, Stop};
use engram_judge::Judge;
use engram_judge::JudgeCache;

use crate::config::QaConfig;
use crate::context::{Ctx, Sent};
use crate::error::{QaError, Result};
use crate::freshness::RunIdentity;
use crate::llm::{CachedLlm, Llm};
use crate::pipeline::produce;
use crate::prompts::QaPrompts;
use crate::record::PairRecord;

pub use crate::manifest::{Endpoint, FORMAT, QaManifest, run_dir};

/// What a run needs.
pub struct QaSpec<'a> {
    /// The corpus directory.
    pub corpus: &'a Path,
    /// The fact file to write.
    pub out: &'a Path,
    /// Settings.
    pub cfg: &'a QaConfig,
    /// Prompts.
    pub prompts: &'a QaPrompts,
    /// The generator (it also answers the checks' questions).
    pub generator: &'a dyn Llm,
    /// The model the table will train, asked closed-book (the second groundedness check).
    pub target: Option<&'a dyn Llm>,
    /// The judge.
    pub judge: &'a dyn Judge,
    /// The judge's endpoint, when it has one (for `--local-only`).
    pub judge_endpoint: Option<String>,
    /// Refuse every endpoint that is not on this machine.
    pub local_only: bool,
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct QaSummary {
    /// Its manifest.
    pub manifest: QaManifest,
    /// Where the facts went.
    pub facts: PathBuf,
    /// Where the records went.
    pub dir: PathBuf,
}

/// The documents QA generation reads from a corpus: those the filter kept, or every document
/// read when it was never filtered (`true` then).
pub fn corpus_documents(corpus: &Path) -> Result<(Vec<Document>, bool)> {
    let c = Corpus::at(corpus);
    let manifest = c.manifest()?;
    let (docs, unfiltered) = match manifest.filter {
        Some(_) => (c.kept()?, false),
        None => (c.documents()?, true),
    };
    if docs.is_empty() {
        let why = match &manifest.filter {
            None => "it holds no document".to_string(),
            Some(f) => format!(
                "the filter kept none of its {} documents: {}",
                manifest.documents,
                counts_text(f.dropped_by_rule.iter().map(|(r, n)| (r.as_str(), *n)))
            ),
        };
        return Err(QaError::NoDocuments {
            path: corpus.to_path_buf(),
            why,
        });
    }
    Ok((docs, unfiltered))
}

/// The fingerprint of the documents QA generation reads from `corpus`
/// ([`Corpus::fingerprint`]): part of what decides its facts.
pub fn corpus_fingerprint(corpus: &Path) -> Result<String> {
    Ok(Corpus::at(corpus).fingerprint()?)
}

/// `reason n, reason n, …` of the non-zero counts, for errors.
fn counts_text<'a>(counts: impl Iterator<Item = (&'a str, usize)>) -> String {
    counts
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{r} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--local-only`: names the first endpoint that is not on this machine.
fn check_local(spec: &QaSpec) -> Result<()> {
    if !spec.local_only {
        return Ok(());
    }
    let llms = [("generator", Some(spec.generator)), ("target", spec.target)];
    for (role, llm) in llms {
        if let Some(l) = llm.filter(|l| !l.is_local()) {
            return Err(QaError::NotLocal {
                role,
                url: l.endpoint(),
            });
        }
    }
    if let Some(url) = spec
        .judge_endpoint
        .as_ref()
        .filter(|u| !engram_judge::is_loopback(u))
    {
        return Err(QaError::NotLocal {
            role: "judge",
            url: url.clone(),
        });
    }
    Ok(())
}

impl QaSpec<'_> {
    /// What decides this run's facts ([`RunIdentity::hash`] is the manifest's `settings_hash`);
    /// reads the corpus's documents for their fingerprint.
    pub fn identity(&self) -> Result<RunIdentity<'_>> {
        Ok(RunIdentity {
            cfg: self.cfg,
            prompts: self.prompts,
            generator: self.generator.model(),
            target: self.target.map(|t| t.model()),
            judge: self.judge.fingerprint(),
            corpus: corpus_fingerprint(self.corpus)?,
        })
    }
}

/// Removes `path` where it exists, naming it where it cannot be removed.
fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(QaError::file(path)(e)),
        _ => Ok(()),
    }
}

fn append_sent(path: &Path, sent: &[Sent]) -> Result<()> {
    if sent.is_empty() {
        return Ok(());
    }
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut text = String::new();
    for s in sent {
        let mut v = serde_json::to_value(s).expect("serializes");
        v["run"] = run.into();
        text.push_str(&v.to_string());
        text.push('\n');
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(QaError::file(path))?;
    f.write_all(text.as_bytes()).map_err(QaError::file(path))
}

/// Runs QA generation as `spec` says, reporting to `progress`; stops between documents when
/// `stop` is requested. Records are written whatever happens; the fact file only when every
/// document is finished.
pub fn generate_facts(spec: &QaSpec, stop: &Stop, progress: &dyn Progress) -> Result<QaSummary> {
    spec.cfg.check()?;
    check_local(spec)?;
    let (documents, _) = corpus_documents(spec.corpus)?;
    let identity = spec.identity()?;
    let dir = run_dir(spec.out);
    std::fs::create_dir_all(&dir).map_err(QaError::file(&dir))?;
    let cache = JudgeCache::open_shared(&dir.join("cache"))?;
    let generator = CachedLlm::new(spec.generator, &cache);
    let target = spec.target.map(|t| CachedLlm::new(t, &cache));
    let ctx = Ctx::new(
        &documents,
        spec.cfg,
        spec.prompts,
        &generator,
        target.as_ref(),
        spec.judge,
    )?;
    let produced = produce(&ctx, stop, progress);
    append_sent(&dir.join("sent.jsonl"), &ctx.sent())?;

    let records: &[PairRecord] = &produced.records;
    let kept: Vec<&PairRecord> = records.iter().filter(|r| r.kept()).collect();
    let mut dropped_by_reason = BTreeMap::new();
    for r in records.iter().filter(|r| !r.kept()) {
        *dropped_by_reason
            .entry(r.reason.clone().unwrap_or_default())
            .or_insert(0) += 1;
    }
    let mut calls = BTreeMap::new();
    calls.insert("generator".to_string(), generator.stats.counts());
    if let Some(t) = &target {
        calls.insert("target".to_string(), t.stats.counts());
    }
    let judged = ctx.judged.load(std::sync::atomic::Ordering::SeqCst);
    let all_calls: usize = calls.values().map(|c| c.asked + c.cached).sum::<usize>() + judged;
    let manifest = QaManifest {
        format: FORMAT,
        engram: env!("CARGO_PKG_VERSION").into(),
        corpus: spec.corpus.display().to_string(),
        corpus_documents: documents.len(),
        corpus_sha256: Some(identity.corpus.clone()),
        documents: ctx.generated_from(),
        complete: produced.error.is_none(),
        unfinished_documents: produced.unfinished,
        truncated_documents: ctx.docs.iter().filter(|d| d.truncated).count(),
        generator: Endpoint {
            model: spec.generator.model(),
            endpoint: spec.generator.endpoint(),
        },
        target: spec.target.map(|t| Endpoint {
            model: t.model(),
            endpoint: t.endpoint(),
        }),
        judge: ctx.judge_fingerprint(),
        settings: spec.cfg.clone(),
        prompts: spec.prompts.dir.display().to_string(),
        settings_hash: identity.hash(),
        pairs: records.len(),
        kept: kept.len(),
        dropped_by_reason,
        calls,
        judged,
        judged_cached: ctx.judged_cached.load(std::sync::atomic::Ordering::SeqCst),
        llm_calls_per_kept_fact: (!kept.is_empty()).then(|| all_calls as f64 / kept.len() as f64),
    };
    let checks_path = dir.join("checks.jsonl");
    engram_io::write_jsonl(&checks_path, records)?;
    // The fact file before the manifest that vouches for it, the earlier manifest gone first:
    // a fact file must never stand beside another run's manifest (it would read as that run's
    // facts), so an earlier one is replaced, or removed where this run made none.
    let manifest_path = dir.join("manifest.json");
    remove_if_present(&manifest_path)?;
    if produced.error.is_some() || kept.is_empty() {
        remove_if_present(spec.out)?;
    } else {
        let facts = kept.iter().map(|r| Fact {
            id: r.id.clone(),
            question: r.question.clone().expect("kept"),
            rephrased_question: r.rephrased_question.clone().expect("kept"),
            answer: r.answer.clone().expect("kept"),
            source: Some(r.document.clone()),
        });
        engram_io::write_jsonl(spec.out, facts)?;
    }
    let manifest_json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
    engram_io::write_file(&manifest_path, &manifest_json)?;
    if let Some(e) = produced.error {
        return Err(e);
    }
    if kept.is_empty() {
        return Err(QaError::NothingKept {
            reasons: counts_text(
                manifest
                    .dropped_by_reason
                    .iter()
                    .map(|(r, n)| (r.as_str(), *n)),
            ),
            path: checks_path,
        });
    }
    Ok(QaSummary {
        manifest,
        facts: spec.out.to_path_buf(),
        dir,
    })
}
