//! Experiments: from an experiment file to the memorization table.
//!
//! The modules are private; what callers need is re-exported here. Start here — the path of one
//! cell:
//! 1. `experiment` reads `experiments/NAME.toml` and resolves the presets it names
//!    (`presets`: model, training, judge), overrides applied, unknown keys named;
//! 2. `facts` loads the fact pool (JSONL, EnronQA's parquet files via `enronqa`, or the
//!    verified facts `corpus_facts` builds from a corpus as `qa_setup` says, with a model
//!    engram runs itself through `local_llm`) and draws the nested samples of every size;
//! 3. `plan` lists the selected `cells` (facts × method) with the configuration hash that
//!    decides each one and its state in the results directory (`--dry-run` adds
//!    `estimate`s to the same plan);
//! 4. an `executor` runs the cells — here, on several devices, or as Slurm job arrays — and
//!    `sweep` runs every cell not done — answers by its method through
//!    `engram_baselines::answer_by` (LoRA trains first), judges them — into one atomic
//!    `record` per cell;
//! 5. `render` turns the records into the `table`, the `plot` and the `per_fact` view.
//!
//! Many sweeps may share one results directory: each cell is run by whoever holds its
//! `lock` (claim), and `status` reports every cell's state from records and claims alone;
//! `launch` freezes the cells to do into a manifest and `slurm` submits them as job arrays.

mod cells;
mod corpus_facts;
mod curve;
mod curve_plot;
mod dry_run;
mod enronqa;
mod error;
mod estimate;
mod executor;
mod experiment;
mod facts;
mod health;
mod launch;
mod local_llm;
mod lock;
mod per_fact;
mod plan;
mod plot;
mod presets;
mod qa_setup;
mod record;
mod render;
mod slurm;
mod stats;
mod status;
mod sweep;
mod table;
mod training_flags;
mod warm_up;

pub use cells::{Cell, Method, expand as expand_cells};
pub use corpus_facts::{FactsReady, prepare_facts};
pub use curve::{SampleExactMatch, exact_match_hits};
pub use curve_plot::svg as curves_svg;
pub use dry_run::{dry_run, local_architecture};
pub use enronqa::write::{EmailRow, write_parquet};
pub use enronqa::{read_parquet, read_split, split_files};
pub use error::{ExperimentError, Result};
pub use estimate::{
    SKIP_MEMORY_CHECK, check_training_device, check_training_memory, default_flops, human_bytes,
    lora_parameters, lora_training_bytes, lora_training_peak,
};
pub use executor::{Devices, DevicesReport, Executor, Job, Local, Outcome, Slurm, Submitted};
pub use experiment::{Experiment, default_configs_dir};
pub use facts::{Samples, load_pool, samples};
pub use launch::Manifest;
pub use local_llm::LocalLlm;
pub use lock::{LockSettings, Requeue, requeue_self, slurm_job, slurm_restarts};
pub use per_fact::{csv as per_fact_csv, markdown as per_fact_markdown};
pub use plan::{CellState, PlannedCell, cell_config, current_plan, hash_json, plan};
pub use plot::svg as plot_svg;
pub use presets::{JudgePreset, ModelPreset, TrainingPreset, parse_file as parse_preset};
pub use record::{
    CellMetrics, CellRecord, CellStatus, CurrentPlan, FORMAT as RECORD_FORMAT, JudgeCounts,
    MethodMetrics, PLAN_FILE, QuestionRecord, ResultsDir, Timings, Versions,
};
pub use render::{CURVES_FILE, VIEW_FILES, render_dir};
pub use slurm::{AUTO_TIME, ArrayJob, DEFAULT_MAX_RESTARTS, Launch, SlurmOptions};
pub use stats::{BOOTSTRAP_RESAMPLES, Z95, bootstrap, mcnemar_exact, wilson};
pub use status::{render_status, status};
pub use sweep::{Stopped, SweepOptions, SweepReport, run_sweep};
pub use table::{Entry, Reference, Table, difference_text, p_text};
pub use training_flags::TrainingFlags;
