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

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use burn::tensor::{DType, Distribution, Tensor};

    use super::Mlp;
    use crate::linear::Linear;
    use crate::lora::LoraAdapter;
    use crate::lora::dropout::pool_scope;

    /// On wgpu, a training forward of an f16 MLP with f32 adapters (f16 standing in for bf16)
    /// casts to f32 in one kernel of its own: the joined gate/up product's, whole. Casting each
    /// half apart (a cast of a slice does not fuse) took two.
    #[test]
    fn a_half_mlps_training_forward_casts_in_one_kernel() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        device.seed(5);
        let (hidden, inner, rows) = (64, 128, 256);
        let random =
            |shape: [usize; 2]| Tensor::<2>::random(shape, Distribution::Normal(0.0, 0.1), &device);
        let linear = |name: &str, d_in: usize, d_out: usize| {
            let mut l = Linear::from_in_out(random([d_in, d_out]).cast(DType::F16), None);
            let (a, b) = (random([d_in, 8]), random([8, d_out]));
            l.lora = Some(LoraAdapter::from_factors(name, a, b, 2.0, 0.05));
            l
        };
        let mut mlp = Mlp {
            gate_proj: linear("mlp.gate_proj", hidden, inner),
            up_proj: linear("mlp.up_proj", hidden, inner),
            down_proj: linear("mlp.down_proj", inner, hidden),
            gate_up: None,
        };
        mlp.join_projections();
        assert!(mlp.gate_up.is_some(), "gate and up joined on wgpu");
        let x = Tensor::<2>::random([rows, hidden], Distribution::Normal(0.0, 1.0), &device)
            .cast(DType::F16)
            .unsqueeze::<3>();
        x.clone().into_data();
        let casts = || {
            let _pool = pool_scope(&device, || mlp.dropout_sites(rows)).expect("a dropout pool");
            let counter = crate::LaunchCounter::start(&device).unwrap();
            mlp.forward(x.clone()).into_data();
            (counter.launched_named("CastElement"), counter.sequence())
        };
        // Once first: the matmuls' autotuning launches candidates.
        casts();
        let (n, sequence) = casts();
        assert_eq!(n, 1, "{sequence:?}");
    }
}
