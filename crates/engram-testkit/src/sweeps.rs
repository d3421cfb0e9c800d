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

/// [`tiny_experiment`] as a GPU sweep: on wgpu (llvmpipe without a GPU), its LoRA cells alone
/// (4 and 8 facts, rank 4) for 3 epochs — the kernel warm-up's smallest case, one leader
/// (`n4-lora-r4`) and one follower (`n8-lora-r4`).
pub fn tiny_wgpu_lora_experiment(root: &Path) -> PathBuf {
    let exp = tiny_experiment(root);
    let text = std::fs::read_to_string(&exp)
        .unwrap()
        .replace("judge = \"f1\"\n", "judge = \"f1\"\nbackend = \"wgpu\"\n")
        .replace("long_context = true", "long_context = false")
        .replace("rag = true", "rag = false");
    std::fs::write(&exp, text).unwrap();
    write(
        root,
        "configs/training/quick.toml",
        "epochs = 3\nlr = 2e-3\nbatch_size = 4\nwarmup_epochs = 0.0\ndecay = false\n",
    );
    exp
}

/// The kernel warm-up's effect in the records of [`tiny_wgpu_lora_experiment`] swept into
/// `results` on an empty kernel cache: the leader started first and compiled kernels, the
/// follower started once the leader had ended and loaded most of its kernels from the cache.
/// Returns (the leader's, the follower's) kernels compiled.
pub fn assert_warmed_up(results: &Path) -> (u64, u64) {
    let record = |id: &str| -> serde_json::Value {
        let p = results.join(format!("cells/{id}.json"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&text).unwrap()
    };
    let (lead, follow) = (record("n4-lora-r4"), record("n8-lora-r4"));
    let n = |r: &serde_json::Value, key: &str| {
        r["kernels"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("no kernels.{key} in {r}"))
    };
    let started = |r: &serde_json::Value| {
        r["finished_unix"].as_f64().unwrap() - r["timings"]["total_s"].as_f64().unwrap()
    };
    assert!(
        started(&follow) >= lead["finished_unix"].as_f64().unwrap() - 1.0,
        "the follower started before its leader ended: {lead}\n{follow}"
    );
    let (cl, cf) = (n(&lead, "kernels_compiled"), n(&follow, "kernels_compiled"));
    assert!(cl > 0 && n(&lead, "autotune_decisions") > 0, "{lead}");
    assert!(
        cf * 4 < cl && n(&follow, "kernels_loaded") > cf,
        "the follower compiled {cf} kernels, its leader {cl}: {follow}"
    );
    (cl, cf)
}
