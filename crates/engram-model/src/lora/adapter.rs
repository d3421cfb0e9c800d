//! One adapter, numerically as PEFT's `LoraLayer`: `s · B(A(dropout(x)))` with factors in
//! Burn's `[in, out]` orientation (`A: [in, r]`, `B: [r, out]`, PEFT's `lora_A.weight [r, in]`
//! and `lora_B.weight [out, r]` transposed), f32 whatever the base dtype, and parameter ids
//! derived from the module's HF name so that optimizer state finds its parameter again.

use burn::module::{Module, Param, ParamId};
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{DType, Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::lora::config::LoraConfig;
use crate::lora::dropout::{host_dropout, host_dropout_applies, pooled_dropout};

/// One adapter: `A: [in, r]`, `B: [r, out]`, dropout and scaling.
#[derive(Module, Debug)]
pub struct LoraAdapter {
    /// `A`, `[in, r]` (PEFT's `lora_A.weight` transposed).
    pub lora_a: Param<Tensor<2>>,
    /// `B`, `[r, out]` (PEFT's `lora_B.weight` transposed).
    pub lora_b: Param<Tensor<2>>,
    /// Dropout on the adapter input (active only while training on an autodiff device).
    pub dropout: Dropout,
    /// `alpha / r` or `alpha / √r`.
    #[module(skip)]
    pub scaling: f64,
    /// The dtype the adapter's matmuls run in: f32 (default, exact), or bf16 as PEFT under
    /// `torch.autocast(bfloat16)` — input, factors and product in bf16, the factors themselves
    /// (the master weights the optimizer updates) and their gradients in f32.
    #[module(skip)]
    pub compute: DType,
}

/// A stable parameter id derived from the parameter's HF name (FNV-1a), so that optimizer state
/// saved in one process finds its parameter in the next.
pub fn param_id_for(name: &str) -> ParamId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ParamId::from(h)
}

fn trainable(name: &str, t: Tensor<2>) -> Param<Tensor<2>> {
    let mut p = Param::from_tensor(t);
    p.id = param_id_for(name);
    p
}

impl LoraAdapter {
    /// An adapter from factors in Burn's orientation (`a: [in, r]`, `b: [r, out]`), converted
    /// to f32, trainable, with ids derived from `name` (`model.layers.3.self_attn.q_proj`).
    pub fn from_factors(
        name: &str,
        a: Tensor<2>,
        b: Tensor<2>,
        scaling: f64,
        dropout: f64,
    ) -> Self {
        Self {
            lora_a: trainable(&format!("{name}.lora_A"), a.cast(DType::F32)),
            lora_b: trainable(&format!("{name}.lora_B"), b.cast(DType::F32)),
            dropout: DropoutConfig::new(dropout).init(),
            scaling,
            compute: DType::F32,
        }
    }

    /// PEFT's default initialisation: `A ~ U(-1/√in, 1/√in)` (Kaiming-uniform, a = √5) from a
    /// host RNG seeded by `seed` and `name`, `B = 0`.
    pub fn init(name: &str, d_in: usize, d_out: usize, cfg: &LoraConfig, device: &Device) -> Self {
        let bound = 1.0 / (d_in as f64).sqrt();
        let seed = cfg.init_seed ^ param_id_for(name).val();
        let mut rng = StdRng::seed_from_u64(seed);
        let a: Vec<f32> = (0..d_in * cfg.rank)
            .map(|_| rng.random_range(-bound..bound) as f32)
            .collect();
        let a = Tensor::from_data(TensorData::new(a, [d_in, cfg.rank]), (device, DType::F32));
        let b = Tensor::zeros([cfg.rank, d_out], (device, DType::F32));
        Self::from_factors(name, a, b, cfg.scaling(), cfg.dropout)
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.lora_a.shape().dims::<2>()[1]
    }

    /// `s · B(A(dropout(x)))` alone, computed in [`LoraAdapter::compute`] and returned in `x`'s
    /// dtype (rounded to it: to add it to a base output as PEFT does, use
    /// [`LoraAdapter::add_to`]).
    pub fn delta<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let dtype = x.dtype();
        self.product(self.prepare(x))
            .mul_scalar(self.scaling)
            .cast(dtype)
    }

    /// The input as this adapter's matmuls read it: cast to [`LoraAdapter::compute`], dropout
    /// applied (while training on an autodiff device).
    pub fn prepare<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        // `Tensor::cast` returns an input already in the dtype as it is.
        let compute = self.compute;
        if host_dropout_applies(&self.dropout, &x) {
            host_dropout(x.cast(compute), self.dropout.prob)
        } else if let Some(dropped) = pooled_dropout(&self.dropout, &x, compute) {
            dropped
        } else {
            self.dropout.forward(x.cast(compute))
        }
    }

    /// The dropout probability when this adapter's [`LoraAdapter::prepare`] draws a mask
    /// (training, non-zero probability), else `None`.
    pub fn dropout_draws(&self) -> Option<f64> {
        (self.dropout.prob > 0.0 && self.dropout.training.is_enabled()).then_some(self.dropout.prob)
    }

    /// Whether `other` prepares its input exactly as this adapter does (compute dtype, dropout
    /// probability and mode), so that one [`LoraAdapter::prepare`]d input can serve both.
    pub fn prepares_like(&self, other: &LoraAdapter) -> bool {
        self.compute == other.compute
            && self.dropout.prob == other.dropout.prob
            && self.dropout.training.is_enabled() == other.dropout.training.is_enabled()
    }

    /// `y + s · B(A(xp))`, in `y`'s dtype, for an input `xp` from [`LoraAdapter::prepare`], added
    /// in PEFT's order (`engram_ops::delta`): with f32 compute on a half-precision `y`, the sum is
    /// formed in f32 and rounded once, as torch's promotion in PEFT's `Linear.forward` does.
    pub fn add_to<const D: usize>(&self, y: Tensor<D>, xp: Tensor<D>) -> Tensor<D> {
        engram_ops::delta::add_delta_tensor(y, self.product(xp), self.scaling)
    }

    /// `B(A(xp))`, unscaled, in [`LoraAdapter::compute`], for an input `xp` from
    /// [`LoraAdapter::prepare`]: [`LoraAdapter::delta`]'s product before its scale and cast, for ops
    /// that scale (and cast) it themselves.
    pub fn product<const D: usize>(&self, xp: Tensor<D>) -> Tensor<D> {
        let factor = |p: &Param<Tensor<2>>| p.val().cast(self.compute);
        let h = burn::tensor::module::linear(xp, factor(&self.lora_a), None);
        burn::tensor::module::linear(h, factor(&self.lora_b), None)
    }

    /// The dense delta `s · A·B`, `[in, out]` (for merging only).
    pub fn dense_delta(&self) -> Tensor<2> {
        self.lora_a
            .val()
            .matmul(self.lora_b.val())
            .mul_scalar(self.scaling)
    }
}
