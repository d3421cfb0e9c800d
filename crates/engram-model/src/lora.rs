//! Low-rank adapters on the block's linear layers, numerically as HF PEFT's `LoraLayer`:
//! `y = base(x) + s · B(A(dropout(x)))` with `s = alpha / r` (or `alpha / √r` with rsLoRA).
//!
//! The delta is two skinny matmuls (`x·A` then `·B`); the dense `in × out` product is never
//! formed in the forward pass (Burn's built-in `apply_lora` forms it every call). Factors are
//! stored in Burn's `[in, out]` orientation — `A: [in, r]`, `B: [r, out]` — i.e. PEFT's
//! `lora_A.weight [r, in]` and `lora_B.weight [out, r]` transposed; export/import transposes.
//! Factors are f32 whatever the base dtype (PEFT's `autocast_adapter_dtype` default), the
//! input is cast to f32 for the adapter and the delta cast back to the base's dtype.

use std::fmt;

use burn::module::{Module, Param, ParamId};
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{DType, Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{ModelError, Result};
use crate::linear::Linear;
use crate::llama::Llama;

/// A linear layer of a decoder block that can carry an adapter (HF module names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoraTarget {
    /// `self_attn.q_proj`.
    Q,
    /// `self_attn.k_proj`.
    K,
    /// `self_attn.v_proj`.
    V,
    /// `self_attn.o_proj`.
    O,
    /// `mlp.gate_proj`.
    Gate,
    /// `mlp.up_proj`.
    Up,
    /// `mlp.down_proj`.
    Down,
}

impl LoraTarget {
    /// Every adaptable linear layer, in HF's order.
    pub const ALL: [LoraTarget; 7] = [
        LoraTarget::Q,
        LoraTarget::K,
        LoraTarget::V,
        LoraTarget::O,
        LoraTarget::Gate,
        LoraTarget::Up,
        LoraTarget::Down,
    ];

    /// The module name PEFT uses in `target_modules` (`q_proj`...).
    pub fn name(self) -> &'static str {
        match self {
            LoraTarget::Q => "q_proj",
            LoraTarget::K => "k_proj",
            LoraTarget::V => "v_proj",
            LoraTarget::O => "o_proj",
            LoraTarget::Gate => "gate_proj",
            LoraTarget::Up => "up_proj",
            LoraTarget::Down => "down_proj",
        }
    }

    /// The path inside a decoder layer (`self_attn.q_proj`, `mlp.down_proj`...).
    pub fn path(self) -> &'static str {
        match self {
            LoraTarget::Q => "self_attn.q_proj",
            LoraTarget::K => "self_attn.k_proj",
            LoraTarget::V => "self_attn.v_proj",
            LoraTarget::O => "self_attn.o_proj",
            LoraTarget::Gate => "mlp.gate_proj",
            LoraTarget::Up => "mlp.up_proj",
            LoraTarget::Down => "mlp.down_proj",
        }
    }

    /// Parses a module name (`q_proj` or `self_attn.q_proj`); `None` for anything else
    /// (embeddings and `lm_head` are never adapted).
    pub fn parse(name: &str) -> Option<Self> {
        let short = name.rsplit('.').next().unwrap_or(name);
        Self::ALL.into_iter().find(|t| t.name() == short)
    }

    /// Parses a list of module names; the error names the first unknown one.
    pub fn parse_list<S: AsRef<str>>(names: &[S]) -> Result<Vec<Self>> {
        let mut out = Vec::new();
        for n in names {
            let t = Self::parse(n.as_ref()).ok_or_else(|| ModelError::BadLora(format!(
                "unknown target module `{}` (adaptable: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)",
                n.as_ref()
            )))?;
            if !out.contains(&t) {
                out.push(t);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for LoraTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Hyper-parameters of a set of adapters. Defaults are EnronQA §6's: alpha = 4 × rank, dropout
/// 0.05, every linear layer of every block.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraConfig {
    /// Rank `r` (≥ 1; may exceed a layer's full rank, as PEFT allows).
    pub rank: usize,
    /// `lora_alpha`.
    pub alpha: f64,
    /// Dropout on the adapter's input during training.
    pub dropout: f64,
    /// rsLoRA scaling `alpha / √r` instead of `alpha / r`.
    pub use_rslora: bool,
    /// Adapted modules.
    pub targets: Vec<LoraTarget>,
    /// Adapted layers (`None` = all), PEFT's `layers_to_transform`.
    pub layers: Option<Vec<usize>>,
    /// Seed of the `A` initialisation.
    pub init_seed: u64,
}

impl LoraConfig {
    /// The paper's setup at `rank`: alpha 4r, dropout 0.05, all seven linear layers.
    pub fn new(rank: usize) -> Self {
        Self {
            rank,
            alpha: 4.0 * rank as f64,
            dropout: 0.05,
            use_rslora: false,
            targets: LoraTarget::ALL.to_vec(),
            layers: None,
            init_seed: 0,
        }
    }

    /// Sets `lora_alpha`.
    pub fn with_alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// Sets the dropout probability.
    pub fn with_dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self
    }

    /// Turns rsLoRA scaling on or off.
    pub fn with_rslora(mut self, on: bool) -> Self {
        self.use_rslora = on;
        self
    }

    /// Sets the adapted modules.
    pub fn with_targets(mut self, targets: Vec<LoraTarget>) -> Self {
        self.targets = targets;
        self
    }

    /// Restricts adapters to these layers.
    pub fn with_layers(mut self, layers: Option<Vec<usize>>) -> Self {
        self.layers = layers;
        self
    }

    /// Sets the initialisation seed.
    pub fn with_init_seed(mut self, seed: u64) -> Self {
        self.init_seed = seed;
        self
    }

    /// `alpha / r`, or `alpha / √r` with rsLoRA.
    pub fn scaling(&self) -> f64 {
        if self.use_rslora {
            self.alpha / (self.rank as f64).sqrt()
        } else {
            self.alpha / self.rank as f64
        }
    }

    /// Checks the values against a model with `num_layers` blocks.
    pub fn validate(&self, num_layers: usize) -> Result<()> {
        let bad = |m: String| Err(ModelError::BadLora(m));
        if self.rank == 0 {
            return bad("rank must be at least 1 (got 0)".into());
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout must be in [0, 1) (got {})", self.dropout));
        }
        if !self.alpha.is_finite() || self.alpha <= 0.0 {
            return bad(format!("alpha must be positive (got {})", self.alpha));
        }
        if self.targets.is_empty() {
            return bad("no target modules".into());
        }
        if let Some(layers) = &self.layers {
            if layers.is_empty() {
                return bad("the layer subset is empty".into());
            }
            if let Some(&l) = layers.iter().find(|&&l| l >= num_layers) {
                return bad(format!(
                    "layer {l} does not exist (the model has {num_layers} layers)"
                ));
            }
        }
        Ok(())
    }

    /// Whether layer `i` is adapted.
    pub fn adapts_layer(&self, i: usize) -> bool {
        self.layers.as_ref().is_none_or(|l| l.contains(&i))
    }
}

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

    /// `s · B(A(dropout(x)))`, in `x`'s dtype.
    pub fn delta<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let dtype = x.dtype();
        let x = if dtype == DType::F32 {
            x
        } else {
            x.cast(DType::F32)
        };
        let x = if host_dropout_applies(&self.dropout, &x) {
            host_dropout(x, self.dropout.prob)
        } else {
            self.dropout.forward(x)
        };
        let h = burn::tensor::module::linear(x, self.lora_a.val(), None);
        let y = burn::tensor::module::linear(h, self.lora_b.val(), None).mul_scalar(self.scaling);
        if dtype == DType::F32 {
            y
        } else {
            y.cast(dtype)
        }
    }

    /// The dense delta `s · A·B`, `[in, out]` (for merging only).
    pub fn dense_delta(&self) -> Tensor<2> {
        self.lora_a
            .val()
            .matmul(self.lora_b.val())
            .mul_scalar(self.scaling)
    }
}

/// Whether [`host_dropout`] replaces Burn's `Dropout` for `x`: training (autodiff) on the CPU
/// backend with a non-zero probability, where Burn draws its Bernoulli mask element by element
/// through a ChaCha generator (measured ≈ 9 % of a rank-256 training step on SmolLM2). The GPU
/// backends keep Burn's on-device generator.
fn host_dropout_applies<const D: usize>(dropout: &Dropout, x: &Tensor<D>) -> bool {
    let device = x.device();
    dropout.prob > 0.0
        && dropout.training.is_enabled()
        && device.is_autodiff()
        && device.inner() == Device::flex()
}

/// Inverted dropout as Burn's and torch's (each element kept with probability `1 - p` and then
/// scaled by `1 / (1 - p)`), with the keep mask drawn on the host by a xoshiro generator. Its
/// seed is drawn from the device's seeded generator, so a seeded run (the trainer reseeds every
/// micro-step) draws the same masks again and a resumed run equals an uninterrupted one.
fn host_dropout<const D: usize>(x: Tensor<D>, p: f64) -> Tensor<D> {
    use burn::tensor::{Distribution, Int};
    use rand::RngCore;
    use rand::rngs::SmallRng;
    let device = x.device();
    let words: Vec<i64> = Tensor::<1, Int>::random([2], Distribution::Uniform(0.0, 2.0e9), &device)
        .into_data()
        .try_into_vec_as::<i64>()
        .expect("int data");
    let mut rng = SmallRng::seed_from_u64(((words[0] as u64) << 32) ^ words[1] as u64);
    let shape = x.shape();
    let n = shape.num_elements();
    // Keep when a uniform 32-bit draw is at or above p · 2³².
    let threshold = (p * 4_294_967_296.0) as u64;
    let scale = (1.0 / (1.0 - p)) as f32;
    let mut mask = Vec::with_capacity(n);
    while mask.len() < n {
        let r = rng.next_u64();
        for half in [r & 0xffff_ffff, r >> 32] {
            if mask.len() < n {
                mask.push(if half >= threshold { scale } else { 0.0 });
            }
        }
    }
    let mask = Tensor::<D>::from_data(TensorData::new(mask, shape), &device).cast(x.dtype());
    x * mask
}

impl Llama {
    /// The linear layer `target` of block `layer`.
    pub fn linear(&self, layer: usize, target: LoraTarget) -> &Linear {
        let l = &self.layers[layer];
        match target {
            LoraTarget::Q => &l.self_attn.q_proj,
            LoraTarget::K => &l.self_attn.k_proj,
            LoraTarget::V => &l.self_attn.v_proj,
            LoraTarget::O => &l.self_attn.o_proj,
            LoraTarget::Gate => &l.mlp.gate_proj,
            LoraTarget::Up => &l.mlp.up_proj,
            LoraTarget::Down => &l.mlp.down_proj,
        }
    }

    /// Mutable access to the linear layer `target` of block `layer`.
    pub fn linear_mut(&mut self, layer: usize, target: LoraTarget) -> &mut Linear {
        let l = &mut self.layers[layer];
        match target {
            LoraTarget::Q => &mut l.self_attn.q_proj,
            LoraTarget::K => &mut l.self_attn.k_proj,
            LoraTarget::V => &mut l.self_attn.v_proj,
            LoraTarget::O => &mut l.self_attn.o_proj,
            LoraTarget::Gate => &mut l.mlp.gate_proj,
            LoraTarget::Up => &mut l.mlp.up_proj,
            LoraTarget::Down => &mut l.mlp.down_proj,
        }
    }

    /// HF name of a linear layer (`model.layers.3.self_attn.q_proj`).
    pub fn linear_name(layer: usize, target: LoraTarget) -> String {
        format!("model.layers.{layer}.{}", target.path())
    }

    /// Freezes every base weight and attaches freshly initialised adapters per `cfg` (replacing
    /// any already attached).
    pub fn with_lora(self, cfg: &LoraConfig) -> Result<Self> {
        cfg.validate(self.layers.len())?;
        let device = self.device();
        let mut model = self.without_lora().no_grad();
        for layer in 0..model.layers.len() {
            if !cfg.adapts_layer(layer) {
                continue;
            }
            for &t in &cfg.targets {
                let name = Self::linear_name(layer, t);
                let lin = model.linear_mut(layer, t);
                let (d_in, d_out) = (lin.d_in(), lin.d_out());
                lin.lora = Some(LoraAdapter::init(&name, d_in, d_out, cfg, &device));
            }
        }
        Ok(model)
    }

    /// Removes every adapter.
    pub fn without_lora(mut self) -> Self {
        for layer in 0..self.layers.len() {
            for t in LoraTarget::ALL {
                self.linear_mut(layer, t).lora = None;
            }
        }
        self
    }

    /// Attached adapters as `(layer, target, adapter)`, by layer then HF module order.
    pub fn adapters(&self) -> Vec<(usize, LoraTarget, &LoraAdapter)> {
        let mut out = Vec::new();
        for layer in 0..self.layers.len() {
            for t in LoraTarget::ALL {
                if let Some(a) = &self.linear(layer, t).lora {
                    out.push((layer, t, a));
                }
            }
        }
        out
    }

    /// Number of adapter parameters.
    pub fn lora_parameter_count(&self) -> usize {
        self.adapters()
            .iter()
            .map(|(_, _, a)| a.lora_a.shape().num_elements() + a.lora_b.shape().num_elements())
            .sum()
    }

    /// Number of parameters in the model, adapters included.
    pub fn parameter_count(&self) -> usize {
        self.num_params()
    }

    /// PEFT's `print_trainable_parameters` line.
    pub fn trainable_parameters_line(&self) -> String {
        let trainable = self.lora_parameter_count();
        let all = self.parameter_count();
        format!(
            "trainable params: {} || all params: {} || trainable%: {:.4}",
            group_thousands(trainable),
            group_thousands(all),
            100.0 * trainable as f64 / all.max(1) as f64
        )
    }

    /// Folds every adapter into its base weight (`W += s·A·B` in the weight's dtype) and removes
    /// the adapters.
    pub fn merge_lora(mut self) -> Self {
        for layer in 0..self.layers.len() {
            for t in LoraTarget::ALL {
                let lin = self.linear_mut(layer, t);
                if let Some(ad) = lin.lora.take() {
                    let w = lin.weight.val();
                    let dtype = w.dtype();
                    let merged = (w.cast(DType::F32) + ad.dense_delta()).cast(dtype);
                    lin.weight = Param::from_tensor(merged.detach()).set_require_grad(false);
                    lin.quantized = None;
                }
            }
        }
        self
    }
}

/// `1234567` → `1,234,567` (as PEFT prints).
fn group_thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_dropout_keeps_one_minus_p_scaled_and_follows_the_seed() {
        let device = Device::flex().autodiff();
        let dropout = DropoutConfig::new(0.25).init();
        let x = Tensor::<2>::ones([64, 500], &device);
        assert!(host_dropout_applies(&dropout, &x));
        assert!(!host_dropout_applies(
            &dropout,
            &Tensor::<2>::ones([2, 2], &Device::flex())
        ));
        assert!(!host_dropout_applies(&DropoutConfig::new(0.0).init(), &x));
        let draw = |seed: u64| -> Vec<f32> {
            device.seed(seed);
            host_dropout(x.clone(), 0.25)
                .into_data()
                .try_into_vec_as::<f32>()
                .unwrap()
        };
        let a = draw(7);
        let scale = 1.0 / 0.75;
        assert!(a.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6));
        let kept = a.iter().filter(|&&v| v != 0.0).count() as f64 / a.len() as f64;
        // 32,000 Bernoulli(0.75) draws: the standard error is 0.0024.
        assert!((kept - 0.75).abs() < 0.015, "kept {kept}");
        assert_eq!(a, draw(7), "same seed, same mask");
        let next = host_dropout(x.clone(), 0.25)
            .into_data()
            .try_into_vec_as::<f32>()
            .unwrap();
        assert_ne!(a, next, "the next call draws another mask");
        assert_ne!(a, draw(8), "another seed, another mask");
    }

    #[test]
    fn scaling_follows_peft() {
        let c = LoraConfig::new(16);
        assert_eq!(c.alpha, 64.0);
        assert_eq!(c.scaling(), 4.0);
        assert_eq!(c.clone().with_rslora(true).scaling(), 16.0);
    }

    #[test]
    fn targets_parse_and_reject() {
        assert_eq!(
            LoraTarget::parse_list(&["q_proj", "mlp.down_proj", "q_proj"]).unwrap(),
            vec![LoraTarget::Q, LoraTarget::Down]
        );
        let e = LoraTarget::parse_list(&["lm_head"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`lm_head`"), "{e}");
    }

    #[test]
    fn bad_configs_are_named() {
        let e = LoraConfig::new(0).validate(2).unwrap_err().to_string();
        assert!(e.contains("rank"), "{e}");
        let e = LoraConfig::new(4)
            .with_layers(Some(vec![5]))
            .validate(2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("layer 5"), "{e}");
    }

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1234567), "1,234,567");
    }
}
