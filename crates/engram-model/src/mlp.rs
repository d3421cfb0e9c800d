//! The SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use burn::module::Module;
use burn::tensor::Tensor;
use burn::tensor::activation::silu;

use crate::linear::{Linear, dropout_sites, shared_adapter_input};

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
    /// The dropout masks [`Mlp::forward`] on `tokens` rows draws, `(probability, elements)`.
    pub fn dropout_sites(&self, tokens: usize) -> Vec<(f64, usize)> {
        let mut sites = dropout_sites(&[&self.gate_proj, &self.up_proj], tokens);
        sites.extend(dropout_sites(&[&self.down_proj], tokens));
        sites
    }

    /// Applies the block to `x: [.., .., hidden]` (the model's token rows, `[1, batch · seq,
    /// hidden]`); `silu(g) · u` in one pass on the CPU backend's inference
    /// ([`crate::cpu_ops::swiglu`], the same bits).
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        // gate's and up's adapters share one prepared input (cast, dropout mask).
        let xa = shared_adapter_input(&[&self.gate_proj, &self.up_proj], &x);
        let g = self.gate_proj.forward_prepared(x.clone(), xa.clone());
        let u = self.up_proj.forward_prepared(x, xa);
        let h = crate::cpu_ops::swiglu(&g, &u).unwrap_or_else(|| silu(g) * u);
        self.down_proj.forward(h)
    }
}
