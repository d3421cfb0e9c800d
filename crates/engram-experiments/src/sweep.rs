//! The sweep runner: every selected cell of an experiment, one after another — LoRA = train →
//! answer the original questions → judge; long context and RAG = answer → judge — with one
//! record per cell under `results/<experiment>/cells/`.
//!
//! Nothing computed is lost: a LoRA cell trains with per-epoch checkpoints in
//! `work/<cell>/` and resumes from them; answers are saved in `work/<cell>/answers.json` before
//! the judge runs (an unreachable judge costs no retraining); records are written atomically. A
//! rerun skips cells whose record matches the current configuration hash, runs again cells that
//! failed, are stale or whose record is corrupt (reported), and finishes interrupted ones.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use engram_baselines::rag::BertEncoder;
use engram_baselines::{
    LongContext, LongContextConfig, RagConfig, long_context_answers, rag_answers,
};
use engram_checkpoint::Checkpoint;
use engram_facts::{Fact, nested_samples, read_facts};
use engram_judge::cache::JudgeCache;
use engram_judge::{
    ExactMatchJudge, GoldRecallJudge, Judge, JudgeItem, JudgePrompt, OpenAiJudge,
    OpenAiJudgeConfig, TokenF1Judge,
};
use engram_lora::trainer::ProgressGroup;
use engram_lora::{AnswerConfig, TrainConfig, Trainer, answer_questions};
use engram_model::{Llama, WeightDType, device_from_name};
use engram_tokenizer::ChatTokenizer;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::cells::{Cell, Method, expand, select};
use crate::enronqa;
use crate::error::ExperimentError;
use crate::experiment::Experiment;
use crate::presets::JudgePreset;
use crate::record::{
    CellRecord, CellStatus, FORMAT, Found, QuestionRecord, ResultsDir, Timings, hash_json,
};

/// The Burn release engram is built on (recorded in every cell).
pub const BURN_VERSION: &str = "0.22.1";

/// How to run a sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The results directory (`results/<experiment>` by default).
    pub results: PathBuf,
    /// `--only` patterns (ids or `*` globs); empty: every cell.
    pub only: Vec<String>,
    /// Draw progress bars (else log lines only).
    pub progress: bool,
}

/// What a sweep did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SweepReport {
    /// Cells run in this invocation.
    pub ran: Vec<String>,
    /// Cells skipped because a matching record exists.
    pub skipped: Vec<String>,
    /// Cells that failed (id, error).
    pub failed: Vec<(String, String)>,
}

/// The experiment's fact pool and a description of its source.
pub fn load_pool(exp: &Experiment) -> Result<(Vec<Fact>, String), ExperimentError> {
    let f = &exp.facts;
    match f.source.as_str() {
        "jsonl" => {
            let path = exp.relative_to_experiment(f.path.as_deref().unwrap_or_default());
            let facts = read_facts(&path)?;
            Ok((facts, path.display().to_string()))
        }
        _ => {
            let split = f.split.as_deref().unwrap_or("train");
            let root = match &f.dir {
                Some(d) => exp.relative_to_experiment(d),
                None => enronqa::fetch_split(split)?,
            };
            let facts = enronqa::read_split(&root, split, f.inbox.as_deref())?;
            let mut desc = format!("EnronQA {split} split ({})", root.display());
            if let Some(inbox) = &f.inbox {
                desc.push_str(&format!(", inbox {inbox}"));
            }
            Ok((facts, desc))
        }
    }
}

/// The nested fact samples of every size, keyed by size.
pub fn samples(
    exp: &Experiment,
    pool: &[Fact],
    source: &str,
) -> Result<BTreeMap<usize, Vec<Fact>>, ExperimentError> {
    let mut sizes = exp.facts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let sets =
        nested_samples(pool, &sizes, exp.facts.seed).map_err(|e| ExperimentError::TooFewFacts {
            experiment: exp.path.clone(),
            wanted: e.wanted,
            available: e.available,
            source_desc: source.to_string(),
        })?;
    Ok(sizes.into_iter().zip(sets).collect())
}

/// Everything that decides a cell's outcome (its hash is the record's `config_hash`). The
/// backend is left out: a sweep may move between machines.
pub fn cell_config(exp: &Experiment, cell: &Cell, facts: &[Fact]) -> Value {
    let fact_text: Vec<Value> = facts
        .iter()
        .map(|f| json!([f.id, f.question, f.rephrased_question, f.answer]))
        .collect();
    let mut judge = serde_json::to_value(&exp.judge).expect("judge preset serializes");
    // Settings that do not change a verdict stay out of the hash.
    if let Some(j) = judge.as_object_mut() {
        for k in ["concurrency", "cache", "api_key_env"] {
            j.remove(k);
        }
    }
    if let JudgePreset::Openai { prompt, .. } = &exp.judge {
        let text = std::fs::read_to_string(exp.relative_to_judge(prompt)).unwrap_or_default();
        judge["prompt_sha256"] = json!(hash_json(&json!(text)));
    }
    let mut cfg = json!({
        "experiment": exp.name,
        "model": {
            "source": exp.model.source,
            "dtype": exp.model.dtype,
            "context_window": exp.model.context_window,
        },
        "facts": {"n": facts.len(), "sha256": hash_json(&Value::Array(fact_text))},
        "method": cell.method,
        "answer": exp.answer,
        "judge": judge,
    });
    match cell.method {
        Method::Lora { .. } => {
            let mut t = serde_json::to_value(&exp.training).expect("training preset serializes");
            t.as_object_mut().expect("object").remove("keep_adapters");
            cfg["training"] = t;
        }
        Method::Rag => {
            cfg["rag"] = json!({
                "k": exp.methods.rag_k,
                "retriever": exp.methods.retriever,
                "encoder": (exp.methods.retriever == "dense").then_some(&exp.methods.encoder),
            });
        }
        Method::LongContext => {}
    }
    cfg
}

/// A cell the sweep will run: its configuration (computed once) and that configuration's hash.
struct Planned {
    cell: Cell,
    config: Value,
    hash: String,
}

/// Answers saved before judging (`work/<cell>/answers.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedAnswers {
    config_hash: String,
    /// `None`: the method was NA (the reason in `na`).
    answers: Option<Vec<String>>,
    na: Option<String>,
    metrics: Value,
    train_s: f64,
    answer_s: f64,
}

/// A model ready to answer (and, on an autodiff device, to train).
struct Session {
    model: Llama,
    tokenizer: ChatTokenizer,
    stop_ids: Vec<u32>,
    load_s: f64,
}

struct Runner<'a> {
    exp: &'a Experiment,
    results: ResultsDir,
    group: MultiProgress,
    progress: bool,
    needs_training: bool,
    session: Option<Session>,
    encoder: Option<BertEncoder>,
    judge: Option<Box<dyn Judge>>,
}

/// Runs the sweep of `exp` (see the module docs) and renders its table at the end.
pub fn run_sweep(exp: &Experiment, opts: &SweepOptions) -> Result<SweepReport> {
    let (pool, source) = load_pool(exp)?;
    let samples = samples(exp, &pool, &source)?;
    let cells = select(&expand(exp), &opts.only);
    if cells.is_empty() {
        return Err(anyhow!(
            "--only {:?} selects none of the cells of {}",
            opts.only,
            exp.path.display()
        ));
    }
    let results = ResultsDir::new(&opts.results);
    results
        .create()
        .with_context(|| format!("cannot use results directory {}", opts.results.display()))?;
    let copy = results.root.join("experiment.toml");
    let text = std::fs::read(&exp.path).with_context(|| exp.path.display().to_string())?;
    engram_lora::atomic::write_file(&copy, &text)?;

    let group = if opts.progress {
        MultiProgress::new()
    } else {
        MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
    };
    let mut runner = Runner {
        exp,
        results,
        group: group.clone(),
        progress: opts.progress,
        needs_training: false,
        session: None,
        encoder: None,
        judge: None,
    };
    runner.log(format!(
        "{}: {} cells ({} facts from {}) → {}",
        exp.name,
        cells.len(),
        samples
            .keys()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("/"),
        source,
        opts.results.display()
    ));

    // Decide what runs before loading anything.
    let mut todo = Vec::new();
    let mut report = SweepReport::default();
    for cell in &cells {
        let facts = &samples[&cell.facts];
        let config = cell_config(exp, cell, facts);
        let hash = hash_json(&config);
        match runner.results.read(&cell.id()) {
            Found::Record(r) if r.config_hash == hash && r.status != CellStatus::Failed => {
                report.skipped.push(cell.id());
                continue;
            }
            Found::Record(r) if r.config_hash != hash => {
                runner.log(format!(
                    "{}: its record was made with another configuration; running it again",
                    cell.id()
                ));
            }
            Found::Record(r) => runner.log(format!(
                "{}: failed before ({}); trying again",
                cell.id(),
                r.error.unwrap_or_default()
            )),
            Found::Corrupt(why) => runner.log(format!("{why}; running the cell again")),
            Found::Missing => {}
        }
        todo.push(Planned {
            cell: *cell,
            config,
            hash,
        });
    }
    if !report.skipped.is_empty() {
        runner.log(format!(
            "{} cells already done: {}",
            report.skipped.len(),
            report.skipped.join(", ")
        ));
    }
    runner.needs_training = todo
        .iter()
        .any(|p| matches!(p.cell.method, Method::Lora { .. }));

    let overall = group.add(ProgressBar::new(todo.len() as u64));
    overall.set_style(
        ProgressStyle::with_template(
            "sweep [{bar:30}] {pos}/{len} cells  {msg}  elapsed {elapsed}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    for plan in todo {
        let id = plan.cell.id();
        overall.set_message(id.clone());
        let facts = &samples[&plan.cell.facts];
        let t0 = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runner.run_cell(&plan, facts)))
            .unwrap_or_else(|panic| {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                Err(anyhow!("panicked: {msg}"))
            });
        let record = match outcome {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("{e:#}");
                report.failed.push((id.clone(), msg.clone()));
                runner.failed_record(plan, msg, t0.elapsed().as_secs_f64())
            }
        };
        runner.results.write(&record)?;
        if record.status != CellStatus::Failed {
            runner.clean_work(&id);
        }
        runner.log(match record.status {
            CellStatus::Done => format!(
                "{id}: accuracy {:.3} ({}/{}) in {:.0} s",
                record.accuracy.unwrap_or(0.0),
                record.metrics["correct"],
                record.questions.len(),
                record.timings.total_s
            ),
            CellStatus::Na => format!("{id}: NA ({})", record.error.unwrap_or_default()),
            CellStatus::Failed => {
                format!("{id}: FAILED: {}", record.error.unwrap_or_default())
            }
        });
        report.ran.push(id);
        overall.inc(1);
    }
    overall.finish_and_clear();
    crate::render::render_dir(&runner.results.root, None)?;
    Ok(report)
}

impl Runner<'_> {
    fn log(&self, line: String) {
        if self.progress {
            let _ = self.group.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    fn work(&self, id: &str) -> PathBuf {
        self.results.work_dir().join(id)
    }

    /// The cell's working directory, emptied if it belongs to another configuration.
    fn prepare_work(&self, id: &str, hash: &str) -> Result<PathBuf> {
        let dir = self.work(id);
        let stamp = dir.join("config_hash");
        if dir.exists() && std::fs::read_to_string(&stamp).ok().as_deref() != Some(hash) {
            std::fs::remove_dir_all(&dir).with_context(|| dir.display().to_string())?;
        }
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        engram_lora::atomic::write_file(&stamp, hash.as_bytes())?;
        Ok(dir)
    }

    /// After a record is written: drop optimizer checkpoints (and the adapter unless kept).
    fn clean_work(&self, id: &str) {
        let dir = self.work(id);
        let _ = std::fs::remove_dir_all(dir.join("checkpoints"));
        if !self.exp.training.keep_adapters || !dir.join("adapter_config.json").exists() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// Loads the model on first use.
    fn ensure_session(&mut self) -> Result<()> {
        if self.session.is_none() {
            let t0 = Instant::now();
            let exp = self.exp;
            let device = device_from_name(&exp.backend)?;
            let device = if self.needs_training {
                device.autodiff()
            } else {
                device
            };
            let dtype = WeightDType::parse(&exp.model.dtype).with_context(|| {
                format!(
                    "{}: dtype `{}` (f32, bf16, f16)",
                    exp.model_file.display(),
                    exp.model.dtype
                )
            })?;
            let source = exp.model_source();
            let spinner = self.group.add(ProgressBar::new_spinner());
            spinner.set_message(format!("loading {source}"));
            spinner.enable_steady_tick(std::time::Duration::from_millis(120));
            let ckpt = Checkpoint::open(&source)?;
            let tokenizer = ChatTokenizer::from_files(&ckpt.tokenizer)?;
            let model = Llama::load(&ckpt, dtype, &device)?;
            let stop_ids = tokenizer.stop_ids(&model.config.eos_token_ids);
            spinner.finish_and_clear();
            let load_s = t0.elapsed().as_secs_f64();
            self.log(format!(
                "loaded {} ({:.1} M parameters) on {} in {load_s:.1} s",
                ckpt.origin,
                model.config.num_parameters() as f64 / 1e6,
                exp.backend
            ));
            self.session = Some(Session {
                model,
                tokenizer,
                stop_ids,
                load_s,
            });
        }
        Ok(())
    }

    fn judge(&mut self) -> Result<&dyn Judge> {
        if self.judge.is_none() {
            let exp = self.exp;
            let judge: Box<dyn Judge> = match &exp.judge {
                JudgePreset::ExactMatch => Box::new(ExactMatchJudge),
                JudgePreset::TokenF1 { threshold } => Box::new(TokenF1Judge {
                    threshold: *threshold,
                }),
                JudgePreset::GoldRecall { threshold } => Box::new(GoldRecallJudge {
                    threshold: *threshold,
                }),
                JudgePreset::Openai {
                    base_url,
                    model,
                    api_key_env,
                    prompt,
                    cache,
                    concurrency,
                } => {
                    let mut cfg = OpenAiJudgeConfig::new(base_url, model);
                    cfg.api_key_env = api_key_env.clone();
                    cfg.concurrency = *concurrency;
                    let cache_path = match cache {
                        Some(c) => exp.relative_to_judge(c),
                        None => self.results.root.join("judge-cache.jsonl"),
                    };
                    let cache = JudgeCache::open(&cache_path)?;
                    let prompt = JudgePrompt::load(&exp.relative_to_judge(prompt))?;
                    Box::new(OpenAiJudge::new(cfg, prompt, cache)?)
                }
            };
            self.judge = Some(judge);
        }
        Ok(self.judge.as_deref().expect("built"))
    }

    fn run_cell(&mut self, plan: &Planned, facts: &[Fact]) -> Result<CellRecord> {
        let (cell, hash) = (&plan.cell, plan.hash.as_str());
        let t0 = Instant::now();
        let id = cell.id();
        let work = self.prepare_work(&id, hash)?;
        let saved_path = work.join("answers.json");
        let saved = std::fs::read(&saved_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<SavedAnswers>(&b).ok())
            .filter(|s| s.config_hash == hash);
        let had_session = self.session.is_some();
        let saved = match saved {
            Some(s) => {
                self.log(format!(
                    "{id}: answers saved by an earlier run; judging them"
                ));
                s
            }
            None => {
                let s = self.answer_cell(cell, facts, hash, &work)?;
                let bytes = serde_json::to_vec_pretty(&s)?;
                engram_lora::atomic::write_file(&saved_path, &bytes)?;
                s
            }
        };
        let load_s = match (&self.session, had_session) {
            (Some(s), false) => s.load_s,
            _ => 0.0,
        };
        let tj = Instant::now();
        let (questions, accuracy, mut metrics) = match &saved.answers {
            None => (
                facts
                    .iter()
                    .map(|f| QuestionRecord {
                        id: f.id.clone(),
                        question: f.question.clone(),
                        gold: f.answer.clone(),
                        answer: None,
                        correct: None,
                        judge_raw: String::new(),
                    })
                    .collect::<Vec<_>>(),
                None,
                json!({}),
            ),
            Some(answers) => {
                let items: Vec<JudgeItem> = facts
                    .iter()
                    .zip(answers)
                    .map(|(f, a)| JudgeItem {
                        id: f.id.clone(),
                        question: f.question.clone(),
                        gold: f.answer.clone(),
                        answer: Some(a.clone()),
                        document: f.source.clone(),
                    })
                    .collect();
                let judge = self.judge()?;
                let verdicts = judge
                    .judge(&items)
                    .with_context(|| format!("judging {id} with {}", judge.name()))?;
                let correct = verdicts.iter().filter(|v| v.correct == Some(true)).count();
                let judged = verdicts.iter().filter(|v| v.correct.is_some()).count();
                let qs = items
                    .into_iter()
                    .zip(verdicts)
                    .map(|(it, v)| QuestionRecord {
                        id: it.id,
                        question: it.question,
                        gold: it.gold,
                        answer: it.answer,
                        correct: v.correct,
                        judge_raw: v.raw,
                    })
                    .collect::<Vec<_>>();
                let acc = correct as f64 / facts.len() as f64;
                (
                    qs,
                    Some(acc),
                    json!({"correct": correct, "judged": judged, "judge": judge.name()}),
                )
            }
        };
        if let (Some(m), Some(extra)) = (metrics.as_object_mut(), saved.metrics.as_object()) {
            for (k, v) in extra {
                m.insert(k.clone(), v.clone());
            }
        }
        let judge_s = tj.elapsed().as_secs_f64();
        Ok(CellRecord {
            format: FORMAT,
            experiment: self.exp.name.clone(),
            cell_id: id,
            cell: *cell,
            config_hash: hash.to_string(),
            config: plan.config.clone(),
            status: if saved.answers.is_some() {
                CellStatus::Done
            } else {
                CellStatus::Na
            },
            error: saved.na.clone(),
            accuracy,
            metrics,
            questions,
            timings: Timings {
                load_s,
                train_s: saved.train_s,
                answer_s: saved.answer_s,
                judge_s,
                total_s: t0.elapsed().as_secs_f64(),
            },
            versions: self.versions(),
            finished_unix: now(),
        })
    }

    fn versions(&self) -> Value {
        json!({
            "engram": env!("CARGO_PKG_VERSION"),
            "burn": BURN_VERSION,
            "backend": self.exp.backend,
            "judge": self.judge.as_ref().map(|j| j.name()),
        })
    }

    /// Produces the cell's answers (training first, for LoRA).
    fn answer_cell(
        &mut self,
        cell: &Cell,
        facts: &[Fact],
        hash: &str,
        work: &Path,
    ) -> Result<SavedAnswers> {
        let exp = self.exp;
        let questions: Vec<String> = facts.iter().map(|f| f.question.clone()).collect();
        let progress = self.progress;
        let group = self.group.clone();
        match cell.method {
            Method::Lora { rank } => {
                let lora = exp.training.lora_config(rank)?;
                let train = TrainConfig {
                    progress,
                    progress_group: ProgressGroup(Some(group.clone())),
                    ..exp.training.train_config()
                };
                self.ensure_session()?;
                let s = self.session.as_ref().expect("loaded");
                let answer_cfg = AnswerConfig {
                    batch_size: exp.answer.batch_size,
                    max_new_tokens: exp.answer.max_new_tokens,
                    stop_ids: s.stop_ids.clone(),
                };
                let trainer = Trainer {
                    tokenizer: &s.tokenizer,
                    lora,
                    train,
                    base_model: exp.model_source(),
                };
                let tt = Instant::now();
                let done = trainer
                    .run(s.model.clone(), facts, work, true)
                    .with_context(|| format!("training into {}", work.display()))?;
                let train_s = tt.elapsed().as_secs_f64();
                let ta = Instant::now();
                let bar = group.add(ProgressBar::new(questions.len() as u64));
                let answers = answer_questions(
                    &done.model,
                    &s.tokenizer,
                    &questions,
                    &answer_cfg,
                    Some(&bar),
                )?;
                bar.finish_and_clear();
                let last = done.record.epochs.last();
                Ok(SavedAnswers {
                    config_hash: hash.to_string(),
                    answers: Some(answers.into_iter().map(|a| a.text).collect()),
                    na: None,
                    metrics: json!({
                        "final_loss": last.map(|e| e.loss),
                        "epochs": done.record.epochs.len(),
                        "trainable_params": done.record.trainable_params,
                        "resumed_after_epoch": done.record.resumed_after_epoch,
                    }),
                    train_s,
                    answer_s: ta.elapsed().as_secs_f64(),
                })
            }
            Method::LongContext => {
                self.ensure_session()?;
                let s = self.session.as_ref().expect("loaded");
                let cfg = LongContextConfig {
                    batch_size: exp.answer.batch_size,
                    max_new_tokens: exp.answer.max_new_tokens,
                    stop_ids: s.stop_ids.clone(),
                    context_cap: exp.model.context_window,
                    progress: Some(group.add(ProgressBar::new(questions.len() as u64))),
                };
                let ta = Instant::now();
                let run = long_context_answers(&s.model, &s.tokenizer, facts, &questions, &cfg);
                if let Some(bar) = &cfg.progress {
                    bar.finish_and_clear();
                }
                let run = run?;
                let answer_s = ta.elapsed().as_secs_f64();
                Ok(match run {
                    LongContext::Answered {
                        answers,
                        prefix_tokens,
                        prefill_tokens,
                        ..
                    } => SavedAnswers {
                        config_hash: hash.to_string(),
                        answers: Some(answers.into_iter().map(|a| a.text).collect()),
                        na: None,
                        metrics: json!({
                            "prefix_tokens": prefix_tokens,
                            "prefill_tokens": prefill_tokens,
                        }),
                        train_s: 0.0,
                        answer_s,
                    },
                    LongContext::NotApplicable { needed, window } => SavedAnswers {
                        config_hash: hash.to_string(),
                        answers: None,
                        na: Some(format!(
                            "the prompt needs {needed} tokens, the window is {window}"
                        )),
                        metrics: json!({"needed_tokens": needed, "window": window}),
                        train_s: 0.0,
                        answer_s,
                    },
                })
            }
            Method::Rag => {
                self.ensure_session()?;
                if exp.methods.retriever == "dense" && self.encoder.is_none() {
                    let device = self.session.as_ref().expect("loaded").model.device();
                    let dir = engram_checkpoint::model_store::model_dir(&exp.methods.encoder)?;
                    self.encoder = Some(
                        BertEncoder::load(&dir, &device)
                            .with_context(|| format!("encoder {}", dir.display()))?,
                    );
                }
                let s = self.session.as_ref().expect("loaded");
                let cfg = RagConfig {
                    k: exp.methods.rag_k,
                    batch_size: exp.answer.batch_size,
                    max_new_tokens: exp.answer.max_new_tokens,
                    stop_ids: s.stop_ids.clone(),
                    progress: Some(group.add(ProgressBar::new(questions.len() as u64))),
                };
                let gold: Vec<usize> = (0..facts.len()).collect();
                let ta = Instant::now();
                let run = rag_answers(
                    &s.model,
                    &s.tokenizer,
                    facts,
                    &questions,
                    &gold,
                    &cfg,
                    self.encoder.as_ref(),
                );
                if let Some(bar) = &cfg.progress {
                    bar.finish_and_clear();
                }
                let run = run?;
                let retrieval: Vec<Value> = run.metrics.iter().map(|m| m.to_json()).collect();
                Ok(SavedAnswers {
                    config_hash: hash.to_string(),
                    answers: Some(run.answers.into_iter().map(|a| a.text).collect()),
                    na: None,
                    metrics: json!({"retrieval": retrieval}),
                    train_s: 0.0,
                    answer_s: ta.elapsed().as_secs_f64(),
                })
            }
        }
    }

    fn failed_record(&self, plan: Planned, error: String, total_s: f64) -> CellRecord {
        CellRecord {
            format: FORMAT,
            experiment: self.exp.name.clone(),
            cell_id: plan.cell.id(),
            cell: plan.cell,
            config_hash: plan.hash,
            config: plan.config,
            status: CellStatus::Failed,
            error: Some(error),
            accuracy: None,
            metrics: json!({}),
            questions: Vec::new(),
            timings: Timings {
                total_s,
                ..Timings::default()
            },
            versions: self.versions(),
            finished_unix: now(),
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
