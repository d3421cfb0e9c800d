//! Experiment files (`experiments/NAME.toml`): which presets, which facts, which methods, and
//! field overrides of the presets. Loading resolves every preset and checks every key.
//!
//! ```toml
//! name = "smoke"                      # default: the file name
//! model = "smollm2-135m-instruct"     # configs/models/<name>.toml (or a path ending .toml)
//! training = "enronqa-lora"           # configs/training/<name>.toml
//! judge = "token-f1"                  # configs/judges/<name>.toml
//! backend = "cpu"                     # cpu, wgpu, cuda[:N], auto
//!
//! [facts]
//! source = "jsonl"                    # or "enronqa", or "corpus" (see crate::qa_setup)
//! path = "data/smoke-facts.jsonl"     # jsonl: relative to this file
//! sizes = [10, 20]
//! seed = 0
//!
//! [methods]
//! lora_ranks = [8, 64]
//! long_context = true
//! rag = true
//!
//! [override.training]                 # any training-preset key
//! lr = 1e-3
//! ```

use std::path::{Path, PathBuf};

use engram_model::AnswerConfig;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{ExperimentError, Result};
use crate::presets::{JudgePreset, ModelPreset, TrainingPreset, parse, preset_file, read};
use crate::qa_setup::{QaSection, QaSetup, prompts_dir};

/// The experiment file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    model: String,
    training: String,
    judge: String,
    #[serde(default = "cpu")]
    backend: String,
    facts: FactsSpec,
    methods: MethodsSpec,
    #[serde(default)]
    answer: AnswerConfig,
    #[serde(default)]
    qa: Option<QaSection>,
    #[serde(default)]
    export: ExportSpec,
    #[serde(default, rename = "override")]
    overrides: Overrides,
}

fn cpu() -> String {
    "cpu".into()
}

/// Per-preset overrides (`[override.model]`, `[override.training]`, `[override.judge]`,
/// `[override.qa]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Overrides {
    #[serde(default)]
    model: toml::Table,
    #[serde(default)]
    training: toml::Table,
    #[serde(default)]
    judge: toml::Table,
    #[serde(default)]
    qa: toml::Table,
}

/// Where the facts come from and how many (`[facts]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactsSpec {
    /// `jsonl` (a fact file), `enronqa` (the EnronQA parquet files, via the hub) or `corpus`
    /// (verified facts generated from a corpus directory as `[qa]` says, then reused).
    pub source: String,
    /// The JSONL file (relative to the experiment file): read for `source = "jsonl"`, written
    /// (and reused while the QA settings hold) for `source = "corpus"`.
    #[serde(default)]
    pub path: Option<String>,
    /// The corpus directory (relative to the experiment file), for `source = "corpus"`.
    #[serde(default)]
    pub corpus: Option<String>,
    /// EnronQA split: train, dev or test.
    #[serde(default)]
    pub split: Option<String>,
    /// Only facts from this EnronQA inbox (the `user` column).
    #[serde(default)]
    pub inbox: Option<String>,
    /// A local directory holding the EnronQA parquet files (`data/*.parquet`) instead of the hub.
    #[serde(default)]
    pub dir: Option<String>,
    /// Fact counts: nested samples (each smaller sample inside every larger one).
    pub sizes: Vec<usize>,
    /// Seed of the sampling order.
    #[serde(default)]
    pub seed: u64,
}

/// Which methods run at every fact count (`[methods]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodsSpec {
    /// LoRA ranks (one cell each).
    #[serde(default)]
    pub lora_ranks: Vec<usize>,
    /// Every fact in the prompt (NA once it does not fit the window).
    #[serde(default)]
    pub long_context: bool,
    /// The top-k retrieved facts in the prompt.
    #[serde(default)]
    pub rag: bool,
    /// RAG's k (EnronQA: 100).
    #[serde(default = "rag_k")]
    pub rag_k: usize,
    /// RAG retriever: bm25 or dense.
    #[serde(default = "bm25")]
    pub retriever: String,
    /// Dense retriever's encoder (registry alias or BERT directory).
    #[serde(default = "minilm")]
    pub encoder: String,
    /// Runs of every LoRA cell, each with its own training seed (the preset's seed + k: the
    /// adapters' initialization, dropout masks and shuffle) and a record of its own
    /// (`n10-lora-r8`, `n10-lora-r8-rep1`, …); the table shows their mean with a bootstrap
    /// interval over facts and replicates. Long context and RAG answer greedily from the same
    /// facts, so they run once (unless `resample_facts`).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub replicates: usize,
    /// Whether replicate k also draws its own fact sample (the `[facts]` seed + k; replicate 0
    /// keeps the experiment's sample): the table's interval then covers the choice of facts as
    /// well. Every method runs once per replicate, each on that replicate's facts, so that
    /// methods stay paired fact for fact within a replicate.
    #[serde(default, skip_serializing_if = "is_false")]
    pub resample_facts: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn one() -> usize {
    1
}
fn is_one(n: &usize) -> bool {
    *n == 1
}

fn rag_k() -> usize {
    engram_baselines::rag::DEFAULT_K
}
fn bm25() -> String {
    "bm25".into()
}
fn minilm() -> String {
    engram_baselines::rag::DEFAULT_ENCODER.into()
}

/// What a sweep also writes for other software (`[export]`); nothing by default. Not part of
/// any cell's configuration: turning it on leaves records done.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportSpec {
    /// Each LoRA cell's adapter also as llama.cpp's LoRA adapter GGUF (`llama-server --lora`,
    /// Ollama's `ADAPTER`): `adapters/<cell>.gguf` in the results directory.
    #[serde(default)]
    pub gguf: bool,
    /// Its tensors' float type: `f16` (default, as llama.cpp's converter) or `f32`.
    #[serde(default)]
    pub gguf_dtype: Option<String>,
}

/// A loaded experiment: its own settings and its resolved presets (overrides applied).
#[derive(Debug, Clone)]
pub struct Experiment {
    /// The experiment file.
    pub path: PathBuf,
    /// Its name (results go to `results/<name>/`).
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// The model.
    pub model: ModelPreset,
    /// Where the model preset was read.
    pub model_file: PathBuf,
    /// The training setup.
    pub training: TrainingPreset,
    /// The judge.
    pub judge: JudgePreset,
    /// Where the judge preset was read.
    pub judge_file: PathBuf,
    /// Compute backend.
    pub backend: String,
    /// The facts.
    pub facts: FactsSpec,
    /// The methods.
    pub methods: MethodsSpec,
    /// Answering (batch size, token limit).
    pub answer: AnswerConfig,
    /// QA generation, for `facts.source = "corpus"`.
    pub qa: Option<QaSetup>,
    /// What the sweep also writes for other software.
    pub export: ExportSpec,
}

/// The `configs/` directory that belongs to an experiment file: `../configs` beside its
/// `experiments/` directory, else `./configs`.
pub fn default_configs_dir(experiment: &Path) -> PathBuf {
    let beside = experiment
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("configs"));
    match beside {
        Some(dir) if dir.is_dir() => dir,
        _ => PathBuf::from("configs"),
    }
}

impl Experiment {
    /// Reads `path`, resolving presets under `configs` (see [`default_configs_dir`]).
    pub fn load(path: &Path, configs: &Path) -> Result<Self> {
        let file: ExperimentFile = parse(path, &read(path)?)?;
        let (model, model_file) =
            resolve::<ModelPreset>(path, configs, "models", &file.model, &file.overrides.model)?;
        let (training, _) = resolve::<TrainingPreset>(
            path,
            configs,
            "training",
            &file.training,
            &file.overrides.training,
        )?;
        let (judge, judge_file) =
            resolve::<JudgePreset>(path, configs, "judges", &file.judge, &file.overrides.judge)?;
        let qa = match &file.qa {
            Some(section) => Some(resolve_qa(
                path,
                configs,
                section,
                &file.overrides.qa,
                (&judge, &judge_file),
            )?),
            None if !file.overrides.qa.is_empty() => {
                return Err(ExperimentError::Config {
                    path: path.to_path_buf(),
                    message: "[override.qa] without a [qa] table (QA generation is for facts.source = \"corpus\")".into(),
                });
            }
            None => None,
        };
        let name = match file.name {
            Some(n) => n,
            None => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "experiment".into()),
        };
        let exp = Self {
            path: path.to_path_buf(),
            name,
            description: file.description,
            model,
            model_file,
            training,
            judge,
            judge_file,
            backend: file.backend,
            facts: file.facts,
            methods: file.methods,
            answer: file.answer,
            qa,
            export: file.export,
        };
        exp.validate()?;
        Ok(exp)
    }

    fn bad(&self, message: String) -> ExperimentError {
        ExperimentError::Config {
            path: self.path.clone(),
            message,
        }
    }

    fn validate(&self) -> Result<()> {
        let f = &self.facts;
        if f.sizes.is_empty() || f.sizes.contains(&0) {
            return Err(self.bad(format!(
                "facts.sizes must list fact counts ≥ 1 (got {:?})",
                f.sizes
            )));
        }
        let enronqa_keys = [("split", &f.split), ("inbox", &f.inbox), ("dir", &f.dir)];
        if f.source != "corpus" {
            if f.corpus.is_some() {
                return Err(self.bad("facts.corpus is only for facts.source = \"corpus\"".into()));
            }
            if self.qa.is_some() {
                return Err(self.bad(format!(
                    "[qa] is only for facts.source = \"corpus\" (this experiment's is \"{}\")",
                    f.source
                )));
            }
        }
        match f.source.as_str() {
            "jsonl" | "corpus" => {
                let s = f.source.as_str();
                if f.path.is_none() {
                    return Err(self.bad(format!("facts.source = \"{s}\" needs facts.path")));
                }
                for (key, v) in enronqa_keys {
                    if v.is_some() {
                        return Err(self.bad(format!(
                            "facts.{key} is only for facts.source = \"enronqa\""
                        )));
                    }
                }
                if s == "corpus" {
                    if f.corpus.is_none() {
                        return Err(self.bad(
                            "facts.source = \"corpus\" needs facts.corpus (a directory from `engram corpus ingest`)".into(),
                        ));
                    }
                    let Some(qa) = &self.qa else {
                        return Err(self.bad(
                            "facts.source = \"corpus\" needs a [qa] table (at least qa.generator)"
                                .into(),
                        ));
                    };
                    let is_local = qa.section.generator.starts_with("local:");
                    if !is_local && qa.section.model.is_none() {
                        return Err(self.bad(format!(
                            "qa.generator = \"{}\" needs qa.model (the model name at that endpoint)",
                            qa.section.generator
                        )));
                    }
                }
            }
            "enronqa" => {
                if f.path.is_some() {
                    return Err(self.bad(
                        "facts.path is only for facts.source = \"jsonl\" or \"corpus\"".into(),
                    ));
                }
                let split = f.split.as_deref().unwrap_or("train");
                if !["train", "dev", "test"].contains(&split) {
                    return Err(self.bad(format!(
                        "facts.split = \"{split}\": EnronQA's splits are train, dev and test"
                    )));
                }
            }
            other => {
                return Err(self.bad(format!(
                    "facts.source = \"{other}\": expected \"jsonl\", \"enronqa\" or \"corpus\""
                )));
            }
        }
        let m = &self.methods;
        if m.lora_ranks.is_empty() && !m.long_context && !m.rag {
            return Err(self.bad(
                "[methods] runs nothing: set lora_ranks, long_context = true or rag = true".into(),
            ));
        }
        if m.replicates == 0 {
            return Err(self.bad(
                "methods.replicates = 0: a cell needs at least one run (1 is the default)".into(),
            ));
        }
        if self.export.gguf_dtype.is_some() && !self.export.gguf {
            return Err(self.bad(
                "export.gguf_dtype is for export.gguf = true (no GGUF adapter is written \
                 without it)"
                    .into(),
            ));
        }
        if let Some(d) = &self.export.gguf_dtype
            && !["f16", "f32"].contains(&d.as_str())
        {
            return Err(self.bad(format!(
                "export.gguf_dtype = \"{d}\": engram writes \"f16\" or \"f32\" adapters"
            )));
        }
        if m.resample_facts && m.replicates < 2 {
            return Err(self.bad(format!(
                "methods.resample_facts = true with methods.replicates = {}: a new fact sample \
                 needs a further replicate (set replicates ≥ 2)",
                m.replicates
            )));
        }
        if m.lora_ranks.contains(&0) {
            return Err(self.bad("methods.lora_ranks: a rank must be ≥ 1".into()));
        }
        // The training settings each rank's cells will run with, checked now rather than after
        // a cell has loaded its model (and, on Slurm, waited in the queue).
        for &rank in &m.lora_ranks {
            let (lora, train) = (
                self.training.lora_config(rank),
                self.training.train_config(rank),
            );
            engram_lora::check_settings(&lora, &train).map_err(|e| {
                self.bad(format!(
                    "the training settings (the training preset with [override.training]) at \
                     rank {rank}: {e}"
                ))
            })?;
        }
        if !["bm25", "dense"].contains(&m.retriever.as_str()) {
            return Err(self.bad(format!(
                "methods.retriever = \"{}\": expected \"bm25\" or \"dense\"",
                m.retriever
            )));
        }
        if m.rag && m.rag_k == 0 {
            return Err(self.bad("methods.rag_k must be ≥ 1".into()));
        }
        if self.answer.batch_size == 0 || self.training.train.batch_size == 0 {
            return Err(self.bad("batch sizes must be ≥ 1".into()));
        }
        // The model preset's architecture file, which the memory estimate and Slurm's memory
        // classes read: named when it is missing or wrong, never skipped unseen.
        self.architecture_file().map_err(|e| self.bad(e))?;
        // The LLM judge's prompt, read now: found missing after every cell has trained, its fix
        // would change the cells' configuration and cost their training.
        if let Some(prompt) = self.judge.prompt_path(&self.judge_dir()) {
            engram_judge::JudgePrompt::load(&prompt)
                .map_err(|e| self.bad(format!("the judge's prompt: {e}")))?;
        }
        Ok(())
    }

    /// The model preset's `architecture` file read as a model config, with where it came
    /// from; `None` where the preset names none. Why it does not read, naming the key and the
    /// file, otherwise.
    pub fn architecture_file(
        &self,
    ) -> std::result::Result<Option<(engram_model::LlamaConfig, String)>, String> {
        let Some(a) = &self.model.architecture else {
            return Ok(None);
        };
        let path = self.model_file.parent().unwrap_or(Path::new(".")).join(a);
        let origin = path.display().to_string();
        let named = |e: String| format!("model.architecture = \"{a}\" ({origin}): {e}");
        let text = std::fs::read_to_string(&path).map_err(|e| named(e.to_string()))?;
        let v = serde_json::from_str(&text).map_err(|e| named(e.to_string()))?;
        let config = engram_model::LlamaConfig::from_hf_json(&v, &origin)
            .map_err(|e| named(e.to_string()))?;
        Ok(Some((config, origin)))
    }

    /// The model source with a relative path taken from the preset's directory.
    pub fn model_source(&self) -> String {
        let beside = self.model_file.parent().map(|d| d.join(&self.model.source));
        match beside {
            Some(p) if p.exists() => p.to_string_lossy().into_owned(),
            _ => self.model.source.clone(),
        }
    }

    /// A path from the experiment file's directory.
    pub fn relative_to_experiment(&self, p: &str) -> PathBuf {
        self.path.parent().unwrap_or(Path::new(".")).join(p)
    }

    /// The judge preset's directory (its relative paths start there).
    pub fn judge_dir(&self) -> PathBuf {
        self.judge_file
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf()
    }
}

/// Finds preset `name` of `kind`, applies `overrides`, and parses it (unknown keys rejected,
/// whether in the preset or in the experiment's override table).
fn resolve<T: DeserializeOwned>(
    experiment: &Path,
    configs: &Path,
    kind: &'static str,
    name: &str,
    overrides: &toml::Table,
) -> Result<(T, PathBuf)> {
    let base = experiment.parent().unwrap_or(Path::new("."));
    let file = preset_file(experiment, base, configs, kind, name)?;
    let text = read(&file)?;
    // The preset alone must be valid (errors then carry its line and column), so that an error
    // after merging is the override's.
    let preset: T = parse(&file, &text)?;
    if overrides.is_empty() {
        return Ok((preset, file));
    }
    let mut table: toml::Table = parse(&file, &text)?;
    for (k, v) in overrides {
        table.insert(k.clone(), v.clone());
    }
    let value = toml::Value::Table(table);
    let parsed = value.try_into().map_err(|e: toml::de::Error| {
        let section = match kind {
            "models" => "model",
            "judges" => "judge",
            "qa" => "qa",
            _ => "training",
        };
        ExperimentError::Config {
            path: experiment.to_path_buf(),
            message: format!(
                "[override.{section}] (over {}): {}",
                file.display(),
                e.to_string().trim_end()
            ),
        }
    })?;
    Ok((parsed, file))
}

/// The `[qa]` table resolved: its settings preset (`configs/qa/<name>.toml`) with
/// `[override.qa]`, checked; its judge preset, or the experiment's (`judge`); its prompts.
fn resolve_qa(
    experiment: &Path,
    configs: &Path,
    section: &QaSection,
    overrides: &toml::Table,
    judge: (&JudgePreset, &Path),
) -> Result<QaSetup> {
    let (cfg, settings_file) =
        resolve::<engram_qa::QaConfig>(experiment, configs, "qa", &section.settings, overrides)?;
    cfg.check().map_err(|e| ExperimentError::Config {
        path: settings_file.clone(),
        message: format!("{e} (with the experiment's [override.qa])"),
    })?;
    let (judge, judge_file) = match &section.judge {
        Some(name) => {
            resolve::<JudgePreset>(experiment, configs, "judges", name, &toml::Table::new())?
        }
        None => (judge.0.clone(), judge.1.to_path_buf()),
    };
    Ok(QaSetup {
        section: section.clone(),
        cfg,
        prompts: prompts_dir(experiment, configs, section.prompts.as_deref()),
        judge,
        judge_dir: judge_file.parent().unwrap_or(Path::new(".")).to_path_buf(),
    })
}
