//! A linear projection holding its weight as `[in, out]`, contiguous (HF stores `[out, in]`;
//! the loader transposes once on the host), with an optional LoRA adapter.

use burn::module::{Module, Param};
use burn::tensor::Tensor;

use crate::lora::LoraAdapter;

/// `y = x W + b`, plus `s·B(A(dropout(x)))` when an adapter is attached.
#[derive(Module, Debug)]
pub struct Linear {
    /// Weight, `[in, out]`.
    pub weight: Param<Tensor<2>>,
    /// Optional bias, `[out]`.
    pub bias: Option<Param<Tensor<1>>>,
    /// Optional low-rank adapter.
    pub lora: Option<LoraAdapter>,
}

impl Linear {
    /// From a weight already laid out `[in, out]` (contiguous) and an optional bias.
    pub fn from_in_out(weight: Tensor<2>, bias: Option<Tensor<1>>) -> Self {
        Self {
            weight: Param::from_tensor(weight),
            bias: bias.map(Param::from_tensor),
            lora: None,
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
        let y = burn::tensor::module::linear(
            x.clone(),
            self.weight.val(),
            self.bias.as_ref().map(|b| b.val()),
        );
        match &self.lora {
            Some(adapter) => y + adapter.delta(x),
            None => y,
        }
    }
}
