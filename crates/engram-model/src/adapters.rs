//! Attaching adapters to a [`Llama`]: which linear layers exist (by block and [`LoraTarget`]),
//! fresh adapters per a [`LoraConfig`] on a frozen base, counting, and folding adapters into
//! the base weights.

use burn::module::{Module, Param};
use burn::tensor::{DType, Device, Tensor};

use crate::error::{ModelError, Result};
use crate::linear::{Joined, Linear};
use crate::llama::Llama;
use crate::lora::{LoraAdapter, LoraConfig, LoraTarget};

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

    /// Runs every attached adapter's matmuls in `dtype` (f32 or bf16; see
    /// [`LoraAdapter::compute`]); the factors stay f32. A dtype the model's device cannot
    /// compute in (bf16 on wgpu, whose WGSL has none) is a named error.
    pub fn with_adapter_compute(mut self, dtype: DType) -> Result<Self> {
        check_adapter_compute(&self.device(), dtype)?;
        for layer in 0..self.layers.len() {
            for t in LoraTarget::ALL {
                if let Some(a) = &mut self.linear_mut(layer, t).lora {
                    a.compute = dtype;
                }
            }
        }
        Ok(self)
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

    /// Every attached adapter factor with its HF-style name
    /// (`model.layers.3.self_attn.q_proj.lora_A`, `…lora_B`), `A` before `B`, by layer then HF
    /// module order.
    pub fn adapter_factors(&self) -> Vec<(String, &Param<Tensor<2>>)> {
        let mut out = Vec::new();
        for (layer, target, ad) in self.adapters() {
            let name = Self::linear_name(layer, target);
            out.push((format!("{name}.lora_A"), &ad.lora_a));
            out.push((format!("{name}.lora_B"), &ad.lora_b));
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

    /// Number of parameters in the model, adapters included (a joined weight's values once:
    /// its parts are views of it; a joined bias, a copy, not at all).
    pub fn parameter_count(&self) -> usize {
        let joined: usize = self
            .layers
            .iter()
            .flat_map(|l| [&l.self_attn.qkv, &l.mlp.gate_up])
            .flatten()
            .map(Joined::values)
            .sum();
        self.num_params() - joined
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
        for layer in &mut self.layers {
            // The merged weights are new tensors: joined copies of the old ones go.
            layer.self_attn.qkv = None;
            layer.mlp.gate_up = None;
        }
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

/// Refuses adapter matmuls in `dtype` on a device that cannot compute in it (bf16 on wgpu,
/// whose WGSL has none) with a named error; callers run it before loading a model, which
/// [`Llama::with_adapter_compute`] would refuse only once loaded.
pub fn check_adapter_compute(device: &Device, dtype: DType) -> Result<()> {
    if dtype != DType::F32 && !device.supports_dtype(dtype) {
        return Err(ModelError::UnsupportedAdapterCompute {
            dtype: format!("{dtype:?}").to_lowercase(),
            device: crate::device::describe(device),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1234567), "1,234,567");
    }
}
