//! A tiny experiment for sweep tests: the tiny fixture model, 4 and 8 synthetic facts, long
//! context, RAG (k 2) and LoRA r 4 (30 quick epochs), judged by token F1 — six cells that run
//! in seconds.

use std::path::{Path, PathBuf};

use crate::{fixtures, repo};

/// Writes `rel` under `root` (directories created).
pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `configs/` and `experiments/tiny.toml` in `root`; returns the experiment file.
pub fn tiny_experiment(root: &Path) -> PathBuf {
    let model = fixtures().join("tiny-f32").canonicalize().unwrap();
    let facts = repo()
        .join("tests/fixtures/facts/synthetic-20.jsonl")
        .canonicalize()
        .unwrap();
    write(
        root,
        "configs/models/tiny.toml",
        &format!("source = {:?}\n", model.display().to_string()),
    );
    write(
        root,
        "configs/training/quick.toml",
        "epochs = 30\nlr = 2e-3\nbatch_size = 4\nwarmup_epochs = 0.0\ndecay = false\n",
    );
    write(root, "configs/judges/f1.toml", "kind = \"token-f1\"\n");
    write(
        root,
        "experiments/tiny.toml",
        &format!(
            "name = \"tiny\"\nmodel = \"tiny\"\ntraining = \"quick\"\njudge = \"f1\"\n\n[facts]\nsource = \"jsonl\"\npath = {:?}\nsizes = [4, 8]\nseed = 1\n\n[methods]\nlora_ranks = [4]\nlong_context = true\nrag = true\nrag_k = 2\n\n[answer]\nbatch_size = 4\nmax_new_tokens = 6\n",
            facts.display().to_string()
        ),
    );
    root.join("experiments/tiny.toml")
}

/// Whether `checkpoints` (a training run's `checkpoints/` directory) holds a finished epoch
/// checkpoint (`epoch-NNNN`; `epoch-NNNN.tmp…` is one being written).
pub fn has_checkpoint(checkpoints: &Path) -> bool {
    std::fs::read_dir(checkpoints).is_ok_and(|d| {
        d.flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("epoch-") && !name.contains('.')
        })
    })
}
