//! Freezing a sweep's remaining cells for a scheduler: the cells still to do, worked out as a
//! local sweep works them out, grouped into resource classes by the dry-run's estimates (a
//! rank-2048 cell does not share a request with rank 8), written to a manifest under
//! `results/<exp>/launch/<unix time>/`. A task names a cell by its index in the manifest; the
//! manifest holds the cell itself (typed: fact count, method, replicate), which the task's sweep
//! selects from its plan by equality — no id is matched or parsed — and whose configuration hash
//! it checks against the experiment as it is when the task runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::cells::Cell;
use crate::dry_run::architecture;
use crate::estimate::estimate;
use crate::experiment::Experiment;
use crate::facts::{load_pool, samples};
use crate::plan::{PlannedCell, plan};
use crate::record::ResultsDir;
use crate::warm_up::{leaders, warm_cells};

/// The manifest's file name inside its launch directory.
pub const MANIFEST: &str = "manifest.json";
/// Manifest format version (2: cells carry their typed key).
pub const FORMAT: u32 = 2;

/// One cell to run, as frozen at submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrozenCell {
    /// The cell id (for people and logs).
    pub id: String,
    /// The cell.
    pub cell: Cell,
    /// Its configuration hash at submission.
    pub hash: String,
}

/// Cells that share one resource request (one job array).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceClass {
    /// `mem-<N>GB` (peak device memory rounded up to a power of two), or `any` without an
    /// architecture to estimate from.
    pub name: String,
    /// Index of its first cell in [`Manifest::cells`]; its cells are contiguous.
    pub first: usize,
    /// Number of its cells.
    pub count: usize,
    /// The longest estimated time of its cells (seconds; 0 without estimates).
    pub seconds: f64,
    /// The largest estimated peak device memory of its cells (bytes; 0 without estimates).
    pub peak_bytes: f64,
    /// How many of its cells, its first ones, lead the kernel warm-up (`warm_up.rs`):
    /// they run before the sweep's other cells start. 0: none (every cell at once).
    #[serde(default)]
    pub leaders: usize,
}

/// A frozen launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The experiment file (absolute).
    pub experiment: PathBuf,
    /// The presets directory (absolute).
    pub configs: PathBuf,
    /// The results directory (absolute).
    pub results: PathBuf,
    /// When it was frozen (Unix seconds).
    pub created_unix: u64,
    /// The cells, grouped by class.
    pub cells: Vec<FrozenCell>,
    /// The classes, in the order of `cells`.
    pub classes: Vec<ResourceClass>,
    /// With the kernel warm-up: a done cell (id) for each method with cells to run whose kernels
    /// are in the cache already (`warm_up.rs`): that method's cells start without a leader.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warm: Vec<String>,
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).with_context(|| p.display().to_string())
}

/// The resource class of an estimated peak of `bytes`: its size in GB rounded up to a power of
/// two (`None` without an estimate).
fn class_gb(bytes: Option<f64>) -> Option<u64> {
    bytes.map(|b| ((b / 1e9).max(1.0).ceil() as u64).next_power_of_two())
}

/// The name of a class of [`class_gb`].
fn class_name(gb: Option<u64>) -> String {
    gb.map_or("any".into(), |g| format!("mem-{g}GB"))
}

/// A cell on its way into a class: whether it leads the warm-up, and its estimates.
struct Member {
    leads: bool,
    cell: FrozenCell,
    seconds: f64,
    peak_bytes: f64,
}

/// Freezes the cells of `exp` that `only` selects and that are not done in `results`, with
/// estimates at `flops` FLOP/s; with `warm_up`, the leaders of the kernel warm-up
/// (`warm_up.rs`: the cheapest cell of each method whose kernels no done cell left in the cache)
/// come first in each class. An empty manifest (nothing to do) is returned as such.
pub fn freeze(
    exp: &Experiment,
    configs: &Path,
    results: &Path,
    only: &[String],
    flops: f64,
    warm_up: bool,
) -> Result<Manifest> {
    let (pool, source) = load_pool(exp)?;
    let samples = samples(exp, &pool, &source)?;
    let planned: Vec<PlannedCell> = plan(exp, &samples, &ResultsDir::new(results), only);
    if planned.is_empty() {
        bail!(
            "--only {only:?} selects none of the cells of {}",
            exp.path.display()
        );
    }
    let arch = architecture(exp);
    let warm = match warm_up {
        true => warm_cells(&planned, &ResultsDir::new(results), &exp.backend),
        false => BTreeMap::new(),
    };
    let planned: Vec<PlannedCell> = planned.into_iter().filter(PlannedCell::runs).collect();
    let lead = match warm_up {
        true => leaders(&planned.iter().map(|p| p.cell).collect::<Vec<_>>(), &warm),
        false => vec![false; planned.len()],
    };
    // Classes smallest first; inside each, its leaders, then the rest, each in table order.
    let mut groups: BTreeMap<Option<u64>, Vec<Member>> = BTreeMap::new();
    for (p, leads) in planned.into_iter().zip(lead) {
        let e = arch
            .as_ref()
            .map(|(cfg, _)| estimate(exp, cfg, &p.cell, samples.of(&p.cell), flops));
        let class = class_gb(e.as_ref().map(|e| e.peak_bytes));
        let (s, b) = e.map_or((0.0, 0.0), |e| (e.seconds, e.peak_bytes));
        let cell = FrozenCell {
            id: p.cell.id(),
            cell: p.cell,
            hash: p.hash,
        };
        groups.entry(class).or_default().push(Member {
            leads,
            cell,
            seconds: s,
            peak_bytes: b,
        });
    }
    let mut cells = Vec::new();
    let mut classes = Vec::new();
    for (gb, mut members) in groups {
        members.sort_by_key(|m| !m.leads);
        classes.push(ResourceClass {
            name: class_name(gb),
            first: cells.len(),
            count: members.len(),
            seconds: members.iter().map(|m| m.seconds).fold(0.0, f64::max),
            peak_bytes: members.iter().map(|m| m.peak_bytes).fold(0.0, f64::max),
            leaders: members.iter().filter(|m| m.leads).count(),
        });
        cells.extend(members.into_iter().map(|m| m.cell));
    }
    Ok(Manifest {
        format: FORMAT,
        experiment: absolute(&exp.path)?,
        configs: absolute(configs)?,
        results: absolute(results)?,
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs(),
        cells,
        classes,
        warm: warm.values().map(Cell::id).collect(),
    })
}

impl Manifest {
    /// A new launch directory for it: `results/<exp>/launch/<unix time>[-n]/`.
    pub fn launch_dir(&self) -> Result<PathBuf> {
        let base = self.results.join("launch");
        for n in 0.. {
            let name = match n {
                0 => self.created_unix.to_string(),
                n => format!("{}-{n}", self.created_unix),
            };
            let dir = base.join(name);
            match std::fs::create_dir_all(&base).and_then(|_| std::fs::create_dir(&dir)) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(anyhow!(e)).with_context(|| {
                        format!(
                            "the results directory {} is not writable",
                            self.results.display()
                        )
                    });
                }
            }
        }
        unreachable!("some launch directory name is free")
    }

    /// Writes it into `dir` (atomically); returns its path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join(MANIFEST);
        engram_io::write_file(&path, &serde_json::to_vec_pretty(self)?)?;
        Ok(path)
    }

    /// Reads a manifest, naming the file in any error.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
        let m: Self = serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: not an engram launch manifest", path.display()))?;
        if m.format != FORMAT {
            bail!(
                "{}: manifest format {} (this engram reads {FORMAT}); submit the sweep again",
                path.display(),
                m.format
            );
        }
        Ok(m)
    }

    /// The task of the cell at `index` of this manifest (read from `path`).
    pub fn task(&self, path: &Path, index: usize) -> Result<FrozenTask> {
        let cell = self.cells.get(index).ok_or_else(|| {
            anyhow!(
                "cell index {index} is out of range: {} holds {} cells (0..{})",
                path.display(),
                self.cells.len(),
                self.cells.len().saturating_sub(1)
            )
        })?;
        Ok(FrozenTask {
            manifest: path.to_path_buf(),
            cell: cell.clone(),
        })
    }
}

/// One task of a launch: a frozen cell and the manifest it comes from. The sweep that runs it
/// checks it against its own plan ([`FrozenTask::check`]), so the facts are loaded once.
#[derive(Debug, Clone, PartialEq)]
pub struct FrozenTask {
    /// The manifest file.
    pub manifest: PathBuf,
    /// The cell.
    pub cell: FrozenCell,
}

impl FrozenTask {
    /// The frozen cell picked from `planned`, the plan of the experiment as it is now, by its
    /// typed key; its configuration hash must be the frozen one (else the experiment changed
    /// since submission).
    pub fn select(&self, planned: Vec<PlannedCell>) -> Result<Vec<PlannedCell>> {
        let (path, cell) = (self.manifest.display(), &self.cell);
        let mine: Vec<PlannedCell> = planned
            .into_iter()
            .filter(|p| p.cell == cell.cell)
            .collect();
        match mine.first() {
            Some(p) if p.hash == cell.hash => Ok(mine),
            Some(p) => bail!(
                "{path}: the experiment changed since submission: cell {} has configuration hash {} now, the manifest froze {}; submit again",
                cell.id,
                p.hash,
                cell.hash
            ),
            None => bail!(
                "{path}: the experiment changed since submission: it has no cell {} any more; submit again",
                cell.id
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_peaks_up_to_powers_of_two() {
        let name = |bytes| class_name(class_gb(bytes));
        assert_eq!(name(None), "any");
        assert_eq!(name(Some(3e8)), "mem-1GB");
        assert_eq!(name(Some(2.5e9)), "mem-4GB");
        assert_eq!(name(Some(111e9)), "mem-128GB");
    }
}
