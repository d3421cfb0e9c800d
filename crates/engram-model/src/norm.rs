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
    /// [`engram_ops::norm::cpu::rms_norm`], the same bits).
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let w = self.weight.val();
        engram_ops::norm::cpu::rms_norm(&x, &w, self.eps)
            .unwrap_or_else(|| rms_norm_ops(x, w, self.eps))
    }
}

/// [`RmsNorm::forward`] in Burn ops (every backend): one operation whose backward is the closed
/// form ([`engram_ops::norm`]); its forward runs the ops of `engram_ops::norm::rms_norm_composed`,
/// in that order.
pub(crate) fn rms_norm_ops<const D: usize>(x: Tensor<D>, w: Tensor<1>, eps: f64) -> Tensor<D> {
    engram_ops::norm::rms_norm(x, w, eps)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, Distribution, Tensor};

    use super::{RmsNorm, rms_norm_ops};

    fn bits<const D: usize>(t: Tensor<D>) -> Vec<u32> {
        let v = t.into_data().try_into_vec_as::<f32>().unwrap();
        v.iter().map(|f| f.to_bits()).collect()
    }

    /// The module (its CPU pass, `engram_ops::norm::cpu::rms_norm`) gives the ops' bits.
    #[test]
    fn the_module_gives_the_ops_bits() {
        let _rng = crate::testing::train_lock();
        let device = Device::flex();
        device.seed(3);
        let random = |shape: Vec<usize>| {
            Tensor::<1>::random(
                [shape.iter().product::<usize>()],
                Distribution::Normal(0.0, 1.0),
                &device,
            )
        };
        let x = random(vec![2, 3, 64]).reshape([2, 3, 64]);
        let norm = RmsNorm::new(random(vec![64]), 1e-6);
        let want = rms_norm_ops(x.clone(), norm.weight.val(), 1e-6);
        assert_eq!(bits(norm.forward(x)), bits(want));
    }
}
