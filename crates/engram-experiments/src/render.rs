//! Writing a results directory's rendered views: `table.md`, `table.csv`, `plot.svg`,
//! `per_fact.md`, `per_fact.csv` (all atomic), from the cell records under `cells/`.

use std::path::{Path, PathBuf};

use crate::error::{ExperimentError, Result};
use crate::record::ResultsDir;
use crate::table::{Reference, Table};

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
}

/// Renders every view of the records in `dir`, with `compare` values beside the measured ones.
pub fn render_dir(dir: &Path, compare: Option<&Reference>) -> Result<Rendered> {
    let results = ResultsDir::new(dir);
    let (records, corrupt) = results.read_all()?;
    let table = Table::from_records(&records);
    let markdown = table.markdown(compare);
    let outputs = [
        ("table.md", markdown.clone()),
        ("table.csv", table.csv()),
        ("plot.svg", crate::plot::svg(&table)),
        ("per_fact.md", crate::per_fact::markdown(&records)),
        ("per_fact.csv", crate::per_fact::csv(&records)),
    ];
    let mut files = Vec::new();
    for (name, text) in outputs {
        let path = dir.join(name);
        engram_lora::atomic::write_file(&path, text.as_bytes()).map_err(|e| {
            ExperimentError::Io {
                path: path.clone(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        files.push(path);
    }
    Ok(Rendered {
        table,
        markdown,
        files,
        corrupt,
    })
}
