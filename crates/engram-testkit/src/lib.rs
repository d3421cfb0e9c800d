//! Shared helpers of engram's tests (a dev-dependency only): where the repository's fixtures
//! are, transformers' reference files, the tiny fixture models and random ones, synthetic
//! facts, a scripted OpenAI-compatible server for judge tests, a progress sink that stops a run
//! part-way, comparisons of value sequences, and a lock for tests that draw from the
//! process-global backend RNG. Tests read fixtures from the repository; only tests of peer
//! tools reach `../shared`.

pub mod facts;
pub mod models;
pub mod openai;
pub mod reference;
pub mod stop;
pub mod sweeps;

pub use facts::{facts, rephrased_hits};
pub use models::{
    base_weights, load, load_on, logits, random_adapters, random_model, small_random, tiny,
    tiny_ckpt,
};
pub use reference::Reference;
use std::path::PathBuf;
pub use stop::StopAfter;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR"))
        .join("../..")
}

/// `tests/fixtures` at the repository root.
pub fn fixtures() -> PathBuf {
    repo().join("tests/fixtures")
}

/// A fixture (model directory or file) under `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// Asserts that `run` follows `reference` value for value: as many values, each within `rel`
/// of the reference's (relative to it); a failure shows both, under `names` (the reference's,
/// the run's).
pub fn assert_follows(reference: &[f64], run: &[f64], rel: f64, (r, n): (&str, &str)) {
    assert_eq!(reference.len(), run.len(), "{r} {reference:?} {n} {run:?}");
    for (a, b) in reference.iter().zip(run) {
        assert!(
            (a - b).abs() <= rel * a.abs(),
            "{r} {reference:?} {n} {run:?}"
        );
    }
}

/// Largest absolute difference of two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Launches of the kernels whose name contains `part`, in a by-kernel count (the model's own).
pub use engram_model::launches::launched_named;

pub use engram_model::testing::{f32_values, max_rel_diff, train_lock};
