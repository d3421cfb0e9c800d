//! A linear projection holding its weight as `[in, out]`, contiguous (HF stores `[out, in]`;
//! the loader transposes once on the host).

use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// `y = x W + b`.
#[derive(Module, Debug)]
pub struct Linear {
    /// Weight, `[in, out]`.
    pub weight: Param<Tensor<2>>,
    /// Optional bias, `[out]`.
    pub bias: Option<Param<Tensor<1>>>,
}

impl Linear {
    /// From a weight already laid out `[in, out]` (contiguous) and an optional bias.
    pub fn from_in_out(weight: Tensor<2>, bias: Option<Tensor<1>>) -> Self {
        Self {
            weight: Param::from_tensor(weight),
            bias: bias.map(Param::from_tensor),
        }
    }

    /// Input width.
    pub fn d_in(&self) -> usize {
        self.weight.shape().dims::<2>()[0]
    }

    /// Output width.
    pub fn d_out(&self) -> usize {
        self.weight.shape().dims::<2>()[1]
    }

    /// Applies the projection to `x: [.., in]`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        burn::tensor::module::linear(x, self.weight.val(), self.bias.as_ref().map(|b| b.val()))
    }
}
