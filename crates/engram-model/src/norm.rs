//! RMSNorm as transformers' `LlamaRMSNorm`: statistics in f32, the normalized value cast back to
//! the input dtype, then scaled by the weight.

use burn::module::{Module, Param};
use burn::tensor::{DType, Tensor};

/// Root-mean-square layer norm.
#[derive(Module, Debug)]
pub struct RmsNorm {
    /// Scale, `[hidden]`.
    pub weight: Param<Tensor<1>>,
    /// Epsilon added to the mean square.
    pub eps: f64,
}

impl RmsNorm {
    /// Wraps a loaded weight.
    pub fn new(weight: Tensor<1>, eps: f64) -> Self {
        Self {
            weight: Param::from_tensor(weight),
            eps,
        }
    }

    /// Normalizes over the last dimension (in one pass on the CPU backend's inference:
    /// [`crate::cpu_ops::rms_norm`], the same bits).
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        if let Some(y) = crate::cpu_ops::rms_norm(&x, &self.weight.val(), self.eps) {
            return y;
        }
        let dtype = x.dtype();
        let x32 = x.cast(DType::F32);
        let var = x32.clone().square().mean_dim(D - 1);
        let normed = (x32 * (var + self.eps).sqrt().recip()).cast(dtype);
        let w = self.weight.val().cast(dtype);
        normed * w.unsqueeze()
    }
}
