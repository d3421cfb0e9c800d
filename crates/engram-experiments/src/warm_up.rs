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

use std::collections::BTreeMap;

use engram_model::kernel_cache::CacheSetting;

use crate::cells::{Cell, Method};

/// Whether a sweep on `backend` gets a kernel warm-up: a GPU backend (or `auto` in a build that
/// has one), not turned off (`off`: the user's `--no-kernel-warm-up`), with a kernel cache to
/// fill.
pub fn wanted(backend: &str, off: bool) -> bool {
    engram_model::is_gpu_backend(backend) && !off && CacheSetting::from_env() != CacheSetting::Off
}

/// Which of `cells` lead: for each method, its cell with the fewest facts (the first replicate
/// among equals). One flag per cell, in order.
pub fn leaders(cells: &[Cell]) -> Vec<bool> {
    let mut first: BTreeMap<Method, usize> = BTreeMap::new();
    for (i, c) in cells.iter().enumerate() {
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
        assert_eq!(
            leaders(&cells),
            [false, false, true, true, true, false, false]
        );
        assert!(leaders(&[]).is_empty());
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
