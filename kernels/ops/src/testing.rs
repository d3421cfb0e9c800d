//! Numeric helpers shared by engram's tests — the model's own unit tests and, re-exported by
//! `engram-testkit`, every other crate's — kept here so that the model's tests need no crate that
//! depends on the model.

use std::sync::{Mutex, MutexGuard};

use burn::tensor::{DType, Tensor};

/// Largest difference of `got` from `want`, relative to `want`'s largest magnitude (how the
/// closed-form backwards are compared with autodiff's); infinite where a NaN stands on either
/// side of a pair, which `f32::max` would otherwise pass over.
pub fn max_rel_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    got.iter().zip(want).fold(0f32, |m, (a, b)| {
        if a == b {
            return m;
        }
        let d = (a - b).abs() / scale;
        if d.is_nan() { f32::INFINITY } else { m.max(d) }
    })
}

/// A tensor's values as f32, whatever its float dtype.
pub fn f32_values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.cast(DType::F32)
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("float values")
}

static TRAIN_LOCK: Mutex<()> = Mutex::new(());

/// Held while a test trains (dropout draws from the process-global backend RNG), and by every
/// test that seeds that RNG or draws from it where another test's seeded draws could follow:
/// the harness runs a binary's tests on parallel threads, and `Backend::seed` sets one generator
/// for the whole process, so a draw of one test landing between another's seed and its draws
/// changes what that one draws.
pub fn train_lock() -> MutexGuard<'static, ()> {
    TRAIN_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The wgpu device with autodiff, as the GPU backends' training tests use it (CI installs Mesa's
/// llvmpipe where there is no GPU).
#[cfg(feature = "wgpu")]
pub fn wgpu_training_device() -> burn::tensor::Device {
    crate::open_device("wgpu")
        .expect("a wgpu adapter (CI installs llvmpipe)")
        .autodiff()
}
