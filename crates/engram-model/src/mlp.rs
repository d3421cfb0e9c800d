//! The SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use burn::module::Module;
use burn::tensor::activation::silu;
use burn::tensor::{Tensor, s};

use crate::linear::{Joined, Linear, dropout_sites, join, shared_adapter_input};
use engram_ops::swiglu::swiglu_joined;

/// Llama MLP.
#[derive(Module, Debug)]
pub struct Mlp {
    /// `gate_proj`.
    pub gate_proj: Linear,
    /// `up_proj`.
    pub up_proj: Linear,
    /// `down_proj`.
    pub down_proj: Linear,
    /// gate's and up's frozen weights side by side, `[hidden, 2 · intermediate]`, on the GPU
    /// backends ([`Mlp::join_projections`]): one product where two ran, each projection's
    /// weight a view of its half. `None` elsewhere; whatever changes a projection's weight
    /// drops it.
    pub gate_up: Option<Joined>,
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
    /// ([`engram_ops::swiglu::cpu::swiglu`], the same bits).
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        // gate's and up's adapters share one prepared input (cast, dropout mask).
        let linears = [&self.gate_proj, &self.up_proj];
        let xa = shared_adapter_input(&linears, &x);
        let Some(w) = &self.gate_up else {
            let g = self.gate_proj.forward_prepared(x.clone(), xa.clone());
            let u = self.up_proj.forward_prepared(x, xa);
            let h = engram_ops::swiglu::cpu::swiglu(&g, &u).unwrap_or_else(|| silu(g) * u);
            return self.down_proj.forward(h);
        };
        // One product with the joined weight, and the adapters' deltas.
        let base = w.forward(x.clone());
        match (linears.map(|l| l.lora.as_ref()), &xa) {
            // The adapters' products, which the joined op scales (and casts): one autodiff
            // node whose backward writes the joined gradient whole.
            ([Some(ag), Some(au)], Some(xa)) if au.scaling == ag.scaling => {
                let (g, u) = (ag.product(xa.clone()), au.product(xa.clone()));
                return self
                    .down_proj
                    .forward(swiglu_joined(base, g, u, ag.scaling));
            }
            _ => {}
        }
        let i = self.gate_proj.d_out();
        let mut from = 0;
        let [g, u] = linears.map(|l| {
            let part = base.clone().slice(s![.., .., from..from + i]);
            from += i;
            match &l.lora {
                Some(a) => {
                    let xp = xa.clone().unwrap_or_else(|| a.prepare(x.clone()));
                    a.add_to(part, xp)
                }
                None => part,
            }
        });
        let h = silu(g) * u;
        self.down_proj.forward(h)
    }

    /// Joins gate's and up's weights ([`Mlp::gate_up`]) where each has a plain float weight
    /// (no bias, no quantized blocks) in one dtype, on a GPU backend; a no-op elsewhere.
    pub fn join_projections(&mut self) {
        if let Some(joined) = join(&mut [&mut self.gate_proj, &mut self.up_proj]) {
            self.gate_up = Some(joined);
        }
    }
}
