//! Writing a results directory's rendered views: `table.md`, `table.csv`, `plot.svg`,
//! `per_fact.md`, `per_fact.csv` and, where records have memorization curves, `curves.svg` (all
//! atomic), from the cell records under `cells/`, marking those that `plan.json` (the
//! experiment's cells as its latest sweep planned them) does not hold as current.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::record::ResultsDir;
use crate::table::{Reference, Table};

/// The memorization curves' picture, written beside [`VIEW_FILES`] when some record has a
/// curve.
pub const CURVES_FILE: &str = "curves.svg";

/// The files [`render_dir`] writes, in order.
pub const VIEW_FILES: [&str; 5] = [
    "table.md",
    "table.csv",
    "plot.svg",
    "per_fact.md",
    "per_fact.csv",
];

/// What [`render_dir`] wrote and found.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The table.
    pub table: Table,
    /// The Markdown text of the table.
    pub markdown: String,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Corrupt records (reported, not used).
    pub corrupt: Vec<String>,
    /// Why the experiment's current plan could not be read (stale records are then not
    /// marked).
    pub plan_unreadable: Option<String>,
}

/// Renders every view of the records in `dir`, with `compare` values beside the measured ones.
pub fn render_dir(dir: &Path, compare: Option<&Reference>) -> Result<Rendered> {
    let results = ResultsDir::new(dir);
    let (records, corrupt) = results.read_all()?;
    let (plan, plan_unreadable) = match results.read_plan() {
        Ok(plan) => (plan, None),
        Err(why) => (None, Some(why)),
    };
    let table = Table::with_plan(&records, plan.as_ref());
    let markdown = table.markdown(compare);
    let texts = [
        markdown.clone(),
        table.csv(),
        crate::plot::svg(&table),
        crate::per_fact::markdown(&records),
        crate::per_fact::csv(&records),
    ];
    let mut files = Vec::new();
    for (name, text) in VIEW_FILES.into_iter().zip(texts) {
        let path = dir.join(name);
        engram_io::write_file(&path, text.as_bytes())?;
        files.push(path);
    }
    // The memorization curves, where the records have them (`eval_every`).
    if let Some(text) = crate::curve_plot::svg(&records) {
        let path = dir.join(CURVES_FILE);
        engram_io::write_file(&path, text.as_bytes())?;
        files.push(path);
    }
    Ok(Rendered {
        table,
        markdown,
        files,
        corrupt,
        plan_unreadable,
    })
}
