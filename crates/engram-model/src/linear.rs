//! A linear projection holding its weight as `[in, out]`, contiguous (HF stores `[out, in]`;
//! the loader transposes once on the host), with an optional LoRA adapter, and optionally the
//! weight as the checkpoint stored it in quantized blocks for [`crate::cpu_matmul`].

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::Tensor;
use engram_kernels::QuantizedMatrix;

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
    /// The weight as the checkpoint stored it in quantized blocks (GGUF Q4_0, Q4_1, Q8_0),
    /// `[out, in]`, kept beside the f32 weight on the CPU device: inference products with few
    /// rows read it through [`crate::cpu_matmul`]'s kernel. It holds exactly the f32 weight's
    /// values (the f32 weight is its dequantization); whatever changes the weight drops it.
    #[module(skip)]
    pub quantized: Option<Arc<QuantizedMatrix>>,
}

impl Linear {
    /// From a weight already laid out `[in, out]` (contiguous) and an optional bias.
    pub fn from_in_out(weight: Tensor<2>, bias: Option<Tensor<1>>) -> Self {
        Self {
            weight: Param::from_tensor(weight),
            bias: bias.map(Param::from_tensor),
            lora: None,
            quantized: None,
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
        let bias = self.bias.as_ref().map(|b| b.val());
        let fast = self
            .quantized
            .as_deref()
            .and_then(|q| crate::cpu_matmul::matmul_nt_quantized(&x, q));
        let y = match fast {
            Some(y) => match bias {
                Some(b) => y + b.unsqueeze(),
                None => y,
            },
            None => burn::tensor::module::linear(x.clone(), self.weight.val(), bias),
        };
        match &self.lora {
            Some(adapter) => y + adapter.delta(x),
            None => y,
        }
    }
}
