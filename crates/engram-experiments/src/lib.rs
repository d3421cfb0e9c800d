//! Experiments: from an experiment file to the memorization table.
//!
//! Start here — the path of one cell:
//! 1. [`experiment`] reads `experiments/NAME.toml` and resolves the presets it names
//!    ([`presets`]: model, training, judge), overrides applied, unknown keys named;
//! 2. [`facts`] loads the fact pool (JSONL, EnronQA's parquet files via [`enronqa`], or the
//!    verified facts [`corpus_facts`] builds from a corpus as [`qa_setup`] says, with a model
//!    engram runs itself through [`local_llm`]) and draws the nested samples of every size;
//! 3. [`plan`] lists the selected [`cells`] (facts × method) with the configuration hash that
//!    decides each one and its state in the results directory (`--dry-run` adds
//!    [`estimate`]s to the same plan);
//! 4. an [`executor`] runs the cells — here, on several devices, or as Slurm job arrays — and
//!    [`sweep`] runs every cell not done — answers by its method through
//!    `engram_baselines::answer_by` (LoRA trains first), judges them — into one atomic
//!    [`record`] per cell;
//! 5. [`render`] turns the records into the [`table`], the [`plot`] and the [`per_fact`] view.
//!
//! Many sweeps may share one results directory: each cell is run by whoever holds its
//! [`lock`] (claim), and [`status`] reports every cell's state from records and claims alone;
//! [`launch`] freezes the cells to do into a manifest and [`slurm`] submits them as job arrays.

pub mod cells;
pub mod corpus_facts;
pub mod curve;
pub mod curve_plot;
pub mod dry_run;
pub mod enronqa;
pub mod error;
pub mod estimate;
pub mod executor;
pub mod experiment;
pub mod facts;
pub mod health;
pub mod launch;
pub mod local_llm;
pub mod lock;
pub mod per_fact;
pub mod plan;
pub mod plot;
pub mod presets;
pub mod qa_setup;
pub mod record;
pub mod render;
pub mod slurm;
pub mod stats;
pub mod status;
pub mod sweep;
pub mod table;

pub use cells::{Cell, Method};
pub use error::{ExperimentError, Result};
pub use experiment::{Experiment, default_configs_dir};
pub use plan::{CellState, PlannedCell, plan};
pub use presets::{JudgePreset, ModelPreset, TrainingPreset};
pub use record::{CellMetrics, CellRecord, CellStatus, ResultsDir};
pub use sweep::{SweepOptions, SweepReport, run_sweep};
pub use table::{Reference, Table};
