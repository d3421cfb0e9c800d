//! The SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use burn::module::Module;
use burn::tensor::Tensor;
use burn::tensor::activation::silu;

use crate::linear::Linear;

/// Llama MLP.
#[derive(Module, Debug)]
pub struct Mlp {
    /// `gate_proj`.
    pub gate_proj: Linear,
    /// `up_proj`.
    pub up_proj: Linear,
    /// `down_proj`.
    pub down_proj: Linear,
}

impl Mlp {
    /// Applies the block to `x: [batch, seq, hidden]`.
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let g = silu(self.gate_proj.forward(x.clone()));
        self.down_proj.forward(g * self.up_proj.forward(x))
    }
}
