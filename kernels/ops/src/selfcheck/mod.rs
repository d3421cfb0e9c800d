//! The hand-written kernels against the Burn ops they replace, on one device and in one dtype:
//! the unit tests' comparisons, also run by `engram selftest` so that a GPU checks its own
//! kernels in its own half type (CUDA compiles the kernels' bf16 code, which neither the CPU
//! backend nor llvmpipe's WGSL runs).
//!
//! - [`rope_attention_pair`]: RoPE and attention (its `rope_attention.rs`);
//! - [`swiglu_pair`]: the MLP's SwiGLU of a joined gate/up product (its `swiglu.rs`).

mod rope_attention;
mod swiglu;

pub use rope_attention::{
    RopeAttentionRun, packed_mask, rope_attention_distance, rope_attention_pair,
};
pub use swiglu::{SwigluRun, swiglu_distance, swiglu_pair};

use crate::testing::max_rel_diff;

/// How far the kernels' run is from the Burn ops' (largest differences relative to the
/// reference's largest magnitude).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelDistance {
    /// The output's.
    pub forward: f32,
    /// The largest of the gradients'.
    pub gradients: f32,
}

impl KernelDistance {
    /// No distance: where a fold over comparisons starts.
    pub const ZERO: Self = Self {
        forward: 0.0,
        gradients: 0.0,
    };

    /// The distance of the op's `(output, gradients)` from the reference's; a gradient the
    /// reference lacks (empty: the tensor got none) is skipped.
    pub fn between(op: (&[f32], &[Vec<f32>]), reference: (&[f32], &[Vec<f32>])) -> Self {
        let gradients =
            op.1.iter()
                .zip(reference.1)
                .filter(|(_, want)| !want.is_empty())
                .fold(0f32, |m, (got, want)| m.max(max_rel_diff(got, want)));
        Self {
            forward: max_rel_diff(op.0, reference.0),
            gradients,
        }
    }

    /// The worse of two distances, part by part.
    pub fn max(self, other: Self) -> Self {
        Self {
            forward: self.forward.max(other.forward),
            gradients: self.gradients.max(other.gradients),
        }
    }

    /// The larger of the two parts.
    pub fn worst(self) -> f32 {
        self.forward.max(self.gradients)
    }
}
