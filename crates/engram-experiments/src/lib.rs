//! Experiments: config presets and sweep files, EnronQA fact sets, the resumable sweep runner,
//! and the rendered memorization table (EnronQA Table 5's layout).
//!
//! - [`experiment`]: experiment files (TOML) that name presets ([`presets`]) and override them;
//!   unknown keys are errors that name the key and the file.
//! - [`enronqa`]: the EnronQA parquet files (hub download at a pinned revision) → facts.
//! - [`cells`]: facts × methods, ids and `--only` selection; [`estimate`]: `--dry-run` figures.
//! - [`sweep`]: runs cells, one atomic [`record`] per cell; reruns resume.
//! - [`table`], [`plot`], [`per_fact`], [`render`]: Markdown/CSV table, SVG plot, per-fact view.

pub mod cells;
pub mod dry_run;
pub mod enronqa;
pub mod error;
pub mod estimate;
pub mod experiment;
pub mod per_fact;
pub mod plot;
pub mod presets;
pub mod record;
pub mod render;
pub mod sweep;
pub mod table;

pub use cells::{Cell, Method};
pub use error::{ExperimentError, Result};
pub use experiment::{Experiment, default_configs_dir};
pub use presets::{JudgePreset, ModelPreset, TrainingPreset};
pub use record::{CellRecord, CellStatus, ResultsDir};
pub use sweep::{SweepOptions, SweepReport, run_sweep};
pub use table::{Reference, Table};
