//! One record per finished (or failed) cell, `results/<experiment>/cells/<cell>.json`, written
//! atomically: what ran (experiment, config hash, the resolved config), what came out (metrics,
//! every question's answer and verdict), how long it took and with which versions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use engram_baselines::rag::RetrievalMetrics;
use engram_model::kernel_cache::CompileSummary;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cells::Cell;
use crate::error::{ExperimentError, Result};

/// The record format version.
pub const FORMAT: u32 = 1;

/// How a cell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellStatus {
    /// Answered and judged.
    Done,
    /// The method does not apply (long context that does not fit the window).
    Na,
    /// An error stopped it (the sweep went on; a rerun tries it again).
    Failed,
}

/// One question's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionRecord {
    /// The fact id.
    pub id: String,
    /// The question asked (the original one).
    pub question: String,
    /// The gold answer.
    pub gold: String,
    /// The model's answer (`None` for NA).
    pub answer: Option<String>,
    /// The verdict (`None`: no verdict).
    pub correct: Option<bool>,
    /// The judge's raw output.
    #[serde(default)]
    pub judge_raw: String,
    /// The judge's reply to its follow-up turn, asked when `judge_raw` held no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_follow_up: Option<String>,
}

/// Seconds spent in each stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Loading the model (first cell of a run only).
    #[serde(default)]
    pub load_s: f64,
    /// LoRA training.
    #[serde(default)]
    pub train_s: f64,
    /// Answering.
    #[serde(default)]
    pub answer_s: f64,
    /// Judging.
    #[serde(default)]
    pub judge_s: f64,
    /// The whole cell.
    pub total_s: f64,
}

/// The verdicts of a judged cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeCounts {
    /// Answers judged correct.
    pub correct: usize,
    /// Answers that got a verdict.
    #[serde(default)]
    pub judged: usize,
    /// The judge's name.
    pub judge: String,
}

/// What a cell's method measured besides the verdicts (told apart by their keys, as records
/// have always held them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MethodMetrics {
    /// A LoRA cell's training.
    Lora {
        /// Mean loss of the last epoch.
        final_loss: Option<f64>,
        /// Epochs trained (before and after any resume).
        epochs: usize,
        /// Adapter parameters.
        trainable_params: usize,
        /// The epoch an interrupted run resumed after.
        resumed_after_epoch: Option<usize>,
        /// Mean loss of every epoch, in order (absent in records made before it was kept):
        /// what the table's health marks read (`diverged`, `collapsed`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        epoch_losses: Vec<f64>,
        /// The memorization curve (`eval_every`): `(epoch, exact match)` on a fixed sample of
        /// the trained questions, after every `eval_every`-th epoch and the last (absent when
        /// not asked for).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        curve: Vec<(usize, f64)>,
    },
    /// A long-context cell's prefill work.
    LongContext {
        /// Tokens of the shared prefix (prefilled once).
        prefix_tokens: usize,
        /// Prompt tokens prefilled in all.
        prefill_tokens: usize,
    },
    /// A long-context cell whose facts do not fit.
    NotApplicable {
        /// Tokens the longest prompt needs.
        needed_tokens: usize,
        /// The window.
        window: usize,
    },
    /// A RAG cell's retrieval quality.
    Rag {
        /// Recall/NDCG at 1, 5, 10 and 100 below `rag_k`, and at `rag_k` (older records also list
        /// the cut-offs above `rag_k`, each then measured on the top `rag_k` only).
        retrieval: Vec<RetrievalMetrics>,
    },
}

/// A cell's figures (a record's `metrics`): the verdict counts when it was judged, and its
/// method's own figures. Read by hand ([`CellMetrics`]'s `Deserialize`): serde's flattened
/// `Option`s would read figures that do not parse as absent, and a record with malformed
/// metrics as a healthy one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CellMetrics {
    /// Correct, judged, judge.
    #[serde(flatten)]
    pub judged: Option<JudgeCounts>,
    /// Training, prefill or retrieval figures.
    #[serde(flatten)]
    pub method: Option<MethodMetrics>,
}

/// The keys of [`JudgeCounts`] in a record's `metrics`.
const JUDGE_KEYS: [&str; 3] = ["correct", "judged", "judge"];

impl<'de> Deserialize<'de> for CellMetrics {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = serde_json::Map::<String, Value>::deserialize(d)?;
        let mut counts = serde_json::Map::new();
        for k in JUDGE_KEYS {
            if let Some(v) = map.remove(k) {
                counts.insert(k.to_string(), v);
            }
        }
        // Present keys must read: an error names what did not, where flatten gave `None`.
        let judged = (!counts.is_empty())
            .then(|| JudgeCounts::deserialize(Value::Object(counts)))
            .transpose()
            .map_err(|e| D::Error::custom(format!("metrics' verdict counts: {e}")))?;
        let method = (!map.is_empty())
            .then(|| MethodMetrics::deserialize(Value::Object(map)))
            .transpose()
            .map_err(|e| D::Error::custom(format!("metrics' method figures: {e}")))?;
        Ok(Self { judged, method })
    }
}

/// The software that made a record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Versions {
    /// engram's version.
    pub engram: String,
    /// Burn's version.
    pub burn: String,
    /// The compute backend.
    pub backend: String,
    /// The judge, once one was built.
    pub judge: Option<String>,
}

/// A cell's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRecord {
    /// [`FORMAT`].
    pub format: u32,
    /// The experiment's name.
    pub experiment: String,
    /// The cell id (`n10-lora-r8`).
    pub cell_id: String,
    /// The cell.
    pub cell: Cell,
    /// SHA-256 of the resolved configuration below: a record whose hash differs from the
    /// experiment's current one is stale and the cell runs again.
    pub config_hash: String,
    /// Everything that determines the cell's outcome.
    pub config: Value,
    /// How it ended.
    pub status: CellStatus,
    /// The error, for failed cells; the reason, for NA cells.
    #[serde(default)]
    pub error: Option<String>,
    /// Questions judged correct / questions (`None` unless done).
    pub accuracy: Option<f64>,
    /// Further figures (correct, judged, train loss, retrieval recall, prompt tokens …).
    pub metrics: CellMetrics,
    /// Every question.
    pub questions: Vec<QuestionRecord>,
    /// Stage timings.
    pub timings: Timings,
    /// GPU kernels compiled and autotune decisions made while the cell ran, on a GPU backend
    /// (its share of the process's; a cell that loads the model counts the load's too); absent
    /// on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<CompileSummary>,
    /// engram, Burn and judge versions.
    pub versions: Versions,
    /// When the record was written (seconds since the Unix epoch).
    pub finished_unix: u64,
}

/// The file under a results directory that holds its experiment's [`CurrentPlan`].
pub const PLAN_FILE: &str = "plan.json";

/// Every cell of the experiment as its latest sweep planned it (all of them, whatever that
/// sweep's `--only`): the configuration hash a record of each must have to be current. The
/// views mark the records that are not ([`crate::table::Table::with_plan`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CurrentPlan {
    /// The experiment's name.
    pub experiment: String,
    /// Cell id → its [`CellRecord::config_hash`] now.
    pub cells: BTreeMap<String, String>,
}

impl CurrentPlan {
    /// Why `rec` is not the current record of its cell (`None` when it is).
    pub fn stale_reason(&self, rec: &CellRecord) -> Option<String> {
        match self.cells.get(&rec.cell_id) {
            None => Some(format!(
                "not a cell of experiment {} as it now stands",
                self.experiment
            )),
            Some(h) if *h != rec.config_hash => Some(format!(
                "made with another configuration than experiment {}'s current one",
                self.experiment
            )),
            Some(_) => None,
        }
    }
}

/// Where a sweep writes: `results/<experiment>/`.
#[derive(Debug, Clone)]
pub struct ResultsDir {
    /// The root.
    pub root: PathBuf,
}

/// What was found for a cell.
#[derive(Debug)]
pub enum Found {
    /// No record.
    Missing,
    /// A readable record.
    Record(Box<CellRecord>),
    /// A record whose content is wrong (named in the message); never used.
    Corrupt(String),
    /// A record the file system would not read just now (an I/O error other than a missing
    /// file: EIO, ESTALE on NFS, a permission): its content is unknown, so it is neither used
    /// nor replaced.
    Unreadable(String),
}

impl ResultsDir {
    /// A results directory at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Creates the directory tree, naming it in any error.
    pub fn create(&self) -> Result<()> {
        for d in [self.cells_dir(), self.work_dir(), self.locks_dir()] {
            std::fs::create_dir_all(&d).map_err(ExperimentError::io(&d))?;
        }
        Ok(())
    }

    /// `cells/`: one JSON record per cell.
    pub fn cells_dir(&self) -> PathBuf {
        self.root.join("cells")
    }

    /// `work/`: per-cell working files (LoRA checkpoints and adapters).
    pub fn work_dir(&self) -> PathBuf {
        self.root.join("work")
    }

    /// `locks/`: the claims of cells being run ([`crate::lock`]).
    pub fn locks_dir(&self) -> PathBuf {
        self.root.join("locks")
    }

    /// The claim file of `cell_id`.
    pub fn lock_path(&self, cell_id: &str) -> PathBuf {
        self.locks_dir().join(format!("{cell_id}.lock"))
    }

    /// The record file of `cell_id`.
    pub fn record_path(&self, cell_id: &str) -> PathBuf {
        self.cells_dir().join(format!("{cell_id}.json"))
    }

    /// `plan.json`: the experiment's [`CurrentPlan`].
    pub fn plan_path(&self) -> PathBuf {
        self.root.join(PLAN_FILE)
    }

    /// Writes the experiment's current plan (atomically).
    pub fn write_plan(&self, plan: &CurrentPlan) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(plan).expect("plans serialize");
        Ok(engram_io::write_file(&self.plan_path(), &bytes)?)
    }

    /// The experiment's current plan: `Ok(None)` where no sweep wrote one (results of earlier
    /// engram versions), an error naming the file where it cannot be read.
    pub fn read_plan(&self) -> std::result::Result<Option<CurrentPlan>, String> {
        let path = self.plan_path();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Reads the record of `cell_id`.
    pub fn read(&self, cell_id: &str) -> Found {
        read_record(&self.record_path(cell_id))
    }

    /// Writes `rec` atomically.
    pub fn write(&self, rec: &CellRecord) -> Result<()> {
        let path = self.record_path(&rec.cell_id);
        let bytes = serde_json::to_vec_pretty(rec).expect("records serialize");
        Ok(engram_io::write_file(&path, &bytes)?)
    }

    /// Every record under `cells/` (sorted by file name), and the corrupt files with why.
    pub fn read_all(&self) -> Result<(Vec<CellRecord>, Vec<String>)> {
        let dir = self.cells_dir();
        if !self.root.is_dir() {
            return Err(ExperimentError::Io {
                path: self.root.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such results directory",
                ),
            });
        }
        let entries = std::fs::read_dir(&dir).map_err(ExperimentError::io(&dir))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        let (mut records, mut corrupt) = (Vec::new(), Vec::new());
        for p in paths {
            match read_record(&p) {
                Found::Record(r) => records.push(*r),
                Found::Corrupt(why) | Found::Unreadable(why) => corrupt.push(why),
                Found::Missing => {}
            }
        }
        Ok((records, corrupt))
    }
}

fn read_record(path: &Path) -> Found {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Missing,
        Err(e) => return Found::Unreadable(format!("{}: {e}", path.display())),
    };
    match serde_json::from_slice::<CellRecord>(&bytes) {
        Ok(r) if r.format != FORMAT => Found::Corrupt(format!(
            "{}: record format {} (this engram writes {FORMAT})",
            path.display(),
            r.format
        )),
        Ok(r) => {
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            if stem.as_deref() != Some(r.cell_id.as_str()) || r.cell.id() != r.cell_id {
                Found::Corrupt(format!(
                    "{}: holds cell `{}`, not the cell its name says",
                    path.display(),
                    r.cell_id
                ))
            } else {
                Found::Record(Box::new(r))
            }
        }
        Err(e) => Found::Corrupt(format!("{}: corrupt cell record ({e})", path.display())),
    }
}
