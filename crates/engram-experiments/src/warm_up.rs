//! The kernel warm-up of a sweep submitted to Slurm on a GPU backend. Every task that starts on
//! a cold kernel cache compiles the same GPU kernels while it holds its GPU idle: the tasks of an
//! array that start together each pay the whole compile (on an H200, 128 s of host work before
//! the 8B's first step). So one cell of each method — the cheapest: the fewest facts, the first
//! replicate — runs first, filling the kernel cache (`ENGRAM_KERNEL_CACHE`) with what that
//! method launches, and the other cells start once those leaders have ended and load the
//! kernels instead. A follower with more facts than its leader still compiles the few kernels
//! of shapes its leader never met.
//!
//! What it trades, measured on the tests' local Slurm (2 CPUs, wgpu on llvmpipe, the tiny LoRA
//! cells with 4 and 8 facts, an empty cache): with the warm-up the leader compiled 236 kernels
//! (64.7 s) and held its allocation 87 s, the follower compiled 17 (2.1 s) and held it 24 s;
//! without it the two ran at once and compiled 150 and 151 (56 s and 59 s), holding 96 s and
//! 91 s. Allocated time fell from 187 s to 111 s, the sweep's wall time rose from 97 s to 114 s:
//! the leader runs alone. `--no-kernel-warm-up` starts every cell at once.
//!
//! It pays where the tasks share a kernel cache: one node, or a shared directory whose database
//! they share (on a network file system each host keeps a database of its own, so only
//! followers on a leader's host gain). On the CPU backend nothing is compiled, and with the
//! cache off nothing is kept: there the cells start together. Several devices of one machine
//! (`--devices`) get no warm-up: their workers own their GPUs anyway, and two cold workers on
//! llvmpipe shared kernels through the cache as they went (96 s, against 99 s warmed up).
//!
//! A resumed sweep needs no leader for a method that has already run: where a cell of it is
//! done on the same kind of backend, by this engram version, with the kernel cache in the
//! directory this sweep's cells will use ([`warm_cells`]), its kernels are in that cache, and
//! every remaining cell of the method starts at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use engram_model::kernel_cache::CacheSetting;

use crate::cells::{Cell, Method};
use crate::plan::{CellState, PlannedCell};
use crate::record::{CellRecord, Found, ResultsDir};

/// Whether a sweep on `backend` gets a kernel warm-up: a GPU backend (or `auto` in a build that
/// has one), not turned off (`off`: the user's `--no-kernel-warm-up`), with a kernel cache to
/// fill.
pub fn wanted(backend: &str, off: bool) -> bool {
    engram_model::is_gpu_backend(backend) && !off && CacheSetting::from_env() != CacheSetting::Off
}

/// For each method with a cell of `planned` still to run whose kernels are in the cache
/// already, one of its cells that shows it: done in `results` on `backend`'s kind of GPU
/// backend, by this engram version, with the kernel cache in the directory this process's
/// setting names ([`CacheSetting::from_env`]; the cells of a Slurm sweep inherit the
/// submitter's environment). Those methods need no warm-up leader. Records are read only until
/// a method has its cell (`plan` read them once already, for their state).
pub fn warm_cells(
    planned: &[PlannedCell],
    results: &ResultsDir,
    backend: &str,
) -> BTreeMap<Method, Cell> {
    let mut warm = BTreeMap::new();
    let CacheSetting::Dir(dir) = CacheSetting::from_env() else {
        return warm;
    };
    let to_run: BTreeSet<Method> = planned
        .iter()
        .filter(|p| p.runs())
        .map(|p| p.cell.method)
        .collect();
    for p in planned.iter().filter(|p| p.state == CellState::Done) {
        let method = p.cell.method;
        if !to_run.contains(&method) || warm.contains_key(&method) {
            continue;
        }
        if let Found::Record(r) = results.read(&p.cell.id())
            && compiled_into(&r, backend, &dir)
        {
            warm.insert(method, p.cell);
        }
    }
    warm
}

/// Whether `record` was made on `backend`'s kind of GPU backend by this engram version, with
/// its kernel cache's database in `dir`.
fn compiled_into(record: &CellRecord, backend: &str, dir: &Path) -> bool {
    let kind = engram_model::backend_kind;
    let database = record.kernels.as_ref().and_then(|k| k.cache.as_deref());
    engram_model::is_gpu_backend(backend)
        && kind(&record.versions.backend) == kind(backend)
        && record.versions.engram == env!("CARGO_PKG_VERSION")
        && database.and_then(Path::parent).map(absolute) == Some(absolute(dir))
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Which of `cells` lead: for each method not in `warm` (methods whose kernels an earlier run
/// left in the cache: [`warm_cells`]), its cell with the fewest facts (the first replicate
/// among equals). One flag per cell, in order.
pub fn leaders(cells: &[Cell], warm: &BTreeMap<Method, Cell>) -> Vec<bool> {
    let mut first: BTreeMap<Method, usize> = BTreeMap::new();
    for (i, c) in cells
        .iter()
        .enumerate()
        .filter(|(_, c)| !warm.contains_key(&c.method))
    {
        let key = |c: &Cell| (c.facts, c.replicate);
        first
            .entry(c.method)
            .and_modify(|l| {
                if key(c) < key(&cells[*l]) {
                    *l = i;
                }
            })
            .or_insert(i);
    }
    let mut lead = vec![false; cells.len()];
    for i in first.into_values() {
        lead[i] = true;
    }
    lead
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cheapest_cell_of_each_method_leads() {
        let lora = |facts, replicate| Cell {
            facts,
            method: Method::Lora { rank: 8 },
            replicate,
        };
        let cells = [
            lora(100, 0),
            lora(10, 1),
            Cell::new(10, Method::Rag),
            lora(10, 0),
            Cell::new(100, Method::Lora { rank: 64 }),
            Cell::new(1000, Method::Lora { rank: 64 }),
            Cell::new(100, Method::Rag),
        ];
        let none = BTreeMap::<Method, Cell>::new();
        assert_eq!(
            leaders(&cells, &none),
            [false, false, true, true, true, false, false]
        );
        assert!(leaders(&[], &none).is_empty());
        let warm = BTreeMap::from([(Method::Lora { rank: 8 }, lora(10, 0))]);
        assert_eq!(
            leaders(&cells, &warm),
            [false, false, true, false, true, false, false],
            "a method an earlier run compiled for leads no more"
        );
    }

    /// A done record of a rank-8 cell made on `backend` with the kernel cache's database at
    /// `database`, by engram `version`.
    fn record(backend: &str, database: Option<&str>, version: &str) -> CellRecord {
        use crate::record::{CellMetrics, CellStatus, Timings, Versions};
        use engram_model::kernel_cache::CompileSummary;
        let cell = Cell::new(10, Method::Lora { rank: 8 });
        CellRecord {
            format: crate::record::FORMAT,
            experiment: "x".into(),
            cell_id: cell.id(),
            cell,
            config_hash: "h".into(),
            config: serde_json::json!({}),
            status: CellStatus::Done,
            error: None,
            accuracy: Some(1.0),
            metrics: CellMetrics::default(),
            questions: Vec::new(),
            timings: Timings::default(),
            kernels: backend.starts_with("wgpu").then(|| CompileSummary {
                kernels_compiled: 150,
                cache: database.map(PathBuf::from),
                ..CompileSummary::default()
            }),
            versions: Versions {
                engram: version.into(),
                backend: backend.into(),
                ..Versions::default()
            },
            finished_unix: 0,
        }
    }

    #[test]
    fn a_cell_done_on_the_same_backend_and_cache_left_its_kernels_there() {
        let v = env!("CARGO_PKG_VERSION");
        let db = format!("/k/engram-{v}.db");
        let dir = Path::new("/k");
        assert!(compiled_into(&record("wgpu", Some(&db), v), "vulkan", dir));
        assert!(compiled_into(&record("wgpu:1", Some(&db), v), "wgpu", dir));
        assert!(
            !compiled_into(&record("wgpu", Some(&db), v), "wgpu", Path::new("/other")),
            "another cache directory"
        );
        assert!(
            !compiled_into(&record("wgpu", None, v), "wgpu", dir),
            "run without a cache"
        );
        assert!(
            !compiled_into(&record("wgpu", Some(&db), "0.0.1"), "wgpu", dir),
            "another engram version keeps a database of its own"
        );
        assert!(
            !compiled_into(&record("cpu", None, v), "wgpu", dir),
            "done on the CPU"
        );
        assert!(
            !compiled_into(&record("wgpu", Some(&db), v), "cuda", dir),
            "another backend"
        );
    }

    #[test]
    fn only_a_gpu_backend_warms_up() {
        assert!(!wanted("cpu", false));
        assert!(!wanted("flex", false), "the CPU backend's other name");
        assert!(!wanted("wgpu", true));
        // The kernel cache's variable is not set in unit tests, so a cache is on.
        if std::env::var_os("ENGRAM_KERNEL_CACHE").is_none() {
            assert!(wanted("wgpu", false));
            assert!(wanted("vulkan", false));
            assert!(wanted("cuda:1", false));
            let first = engram_model::available_backends()[0];
            assert_eq!(wanted("auto", false), first != "cpu", "auto opens {first}");
        }
    }
}
