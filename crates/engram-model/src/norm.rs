//! RMSNorm as transformers' `LlamaRMSNorm`: statistics in f32, the normalized value cast back to
//! the input dtype, then scaled by the weight.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

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
        let w = self.weight.val();
        crate::cpu_ops::rms_norm(&x, &w, self.eps).unwrap_or_else(|| rms_norm_ops(x, w, self.eps))
    }
}

/// [`RmsNorm::forward`] in Burn ops (every backend): one operation whose backward is the closed
/// form ([`crate::norm_op`]); its forward runs the ops of [`rms_norm_composed`], in that order.
pub(crate) fn rms_norm_ops<const D: usize>(x: Tensor<D>, w: Tensor<1>, eps: f64) -> Tensor<D> {
    crate::norm_op::rms_norm(x, w, eps)
}

/// RMSNorm composed of Burn tensor ops, which autodiff differentiates op by op: the reference
/// [`rms_norm_ops`] is tested against.
#[cfg(test)]
pub(crate) fn rms_norm_composed<const D: usize>(x: Tensor<D>, w: Tensor<1>, eps: f64) -> Tensor<D> {
    let dtype = x.dtype();
    let x32 = x.cast(burn::tensor::DType::F32);
    let var = x32.clone().square().mean_dim(D - 1);
    let normed = (x32 * (var + eps).sqrt().recip()).cast(dtype);
    normed * w.cast(dtype).unsqueeze()
}
