//! Shared helpers of engram's tests (a dev-dependency only): where the repository's fixtures
//! are, transformers' reference files, the tiny fixture models and random ones, synthetic
//! facts, a scripted OpenAI-compatible server for judge tests, and a lock for tests that draw
//! from the process-global backend RNG. Tests read
//! fixtures from the repository; only tests of peer tools reach `../shared`.

pub mod facts;
pub mod models;
pub mod openai;
pub mod reference;
pub mod sweeps;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use burn::tensor::{DType, Tensor};

pub use facts::{facts, rephrased_hits};
pub use models::{
    base_weights, load, load_on, logits, random_adapters, random_model, small_random, tiny,
    tiny_ckpt,
};
pub use reference::Reference;

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

/// Largest absolute difference of two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Largest difference of `got` from `want`, relative to `want`'s largest magnitude (how the
/// closed-form backwards are compared with autodiff's).
pub fn max_rel_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    got.iter()
        .zip(want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs() / scale))
}

/// A tensor's values as f32, whatever its float dtype.
pub fn f32_values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.cast(DType::F32)
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("float values")
}

/// Launches of the kernels whose name contains `part`, in a by-kernel count (the model's own).
pub use engram_model::launches::launched_named;

static TRAIN_LOCK: Mutex<()> = Mutex::new(());

/// Held while a test trains (dropout draws from the process-global backend RNG).
pub fn train_lock() -> MutexGuard<'static, ()> {
    TRAIN_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
