//! AdamW over the adapters, one pass per tensor: the clip factor, both moments and the decayed
//! update of a factor are one chain of element-wise ops on the device, which Burn's fusion
//! (wgpu, CUDA) compiles into one kernel reading the factor, its gradient and its two moments
//! and writing the factor and the moments — the least memory traffic AdamW in f32 allows
//! (28 bytes per parameter and step). Burn's `ModuleOptimizer` computes the same update
//! through a dynamic per-parameter optimizer, its state behind type-erased records that only
//! serialize as one host-side copy; here the state is plain device tensors, saved tensor by
//! tensor (`optimizer.safetensors`, PyTorch's names `exp_avg` / `exp_avg_sq`, see
//! [`crate::optimizer_state`]).
//!
//! Numerics are `torch.optim.AdamW`'s (`foreach=False`, `amsgrad=False`):
//! `m ← β₁m + (1-β₁)g`, `v ← β₂v + (1-β₂)g²`, `p ← p(1 - lr·λ) - (lr / (1-β₁ᵗ)) · m /
//! (√v / √(1-β₂ᵗ) + ε)`; Burn's AdamW divides the moments by their corrections before the
//! square root instead, equal up to float rounding (test).

use std::collections::HashMap;

use burn::module::{Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use engram_model::{Llama, LoraTarget};

/// AdamW's hyper-parameters (torch's defaults but the weight decay, which is the run's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWSettings {
    /// β₁.
    pub beta_1: f64,
    /// β₂.
    pub beta_2: f64,
    /// ε.
    pub epsilon: f64,
    /// Decoupled weight decay λ.
    pub weight_decay: f64,
}

impl AdamWSettings {
    /// `torch.optim.AdamW`'s β (0.9, 0.999) and ε (1e-8) with weight decay `weight_decay`.
    pub fn torch(weight_decay: f64) -> Self {
        Self {
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-8,
            weight_decay,
        }
    }
}

/// The moments of one factor (f32, the factor's shape, on its device).
#[derive(Debug, Clone)]
pub struct Moments {
    /// First moment (`exp_avg`).
    pub exp_avg: Tensor<2>,
    /// Second moment (`exp_avg_sq`).
    pub exp_avg_sq: Tensor<2>,
}

/// A step's gradients and the factor clipping scales them by (a `[1]` device tensor, applied
/// inside the update; `None` when clipping is off).
pub struct ClippedGradients {
    /// The adapters' gradients.
    pub grads: GradientsParams,
    /// `min(1, max_norm / (‖g‖ + 1e-6))`.
    pub clip: Option<Tensor<1>>,
}

/// AdamW on a [`Llama`]'s adapter factors, keyed by their name-derived parameter ids.
#[derive(Debug, Clone)]
pub struct AdamW {
    settings: AdamWSettings,
    steps: u64,
    moments: HashMap<ParamId, Moments>,
}

impl AdamW {
    /// A fresh optimizer (no state, step 0).
    pub fn new(settings: AdamWSettings) -> Self {
        Self {
            settings,
            steps: 0,
            moments: HashMap::new(),
        }
    }

    /// An optimizer resuming after `steps` steps with `moments`.
    pub fn from_state(
        settings: AdamWSettings,
        steps: u64,
        moments: HashMap<ParamId, Moments>,
    ) -> Self {
        Self {
            settings,
            steps,
            moments,
        }
    }

    /// The hyper-parameters.
    pub fn settings(&self) -> AdamWSettings {
        self.settings
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The moments of parameter `id`, once it has had a gradient.
    pub fn moments(&self, id: ParamId) -> Option<&Moments> {
        self.moments.get(&id)
    }

    /// Number of parameters with state.
    pub fn len(&self) -> usize {
        self.moments.len()
    }

    /// Whether no parameter has state yet.
    pub fn is_empty(&self) -> bool {
        self.moments.is_empty()
    }

    /// One step at learning rate `lr` on every adapter factor of `model` that has a gradient in
    /// `grads` (factors without one, and their state, are left as they are, as torch does).
    /// Nothing is read from the device.
    pub fn step(&mut self, lr: f64, mut model: Llama, grads: ClippedGradients) -> Llama {
        let ClippedGradients { mut grads, clip } = grads;
        self.steps += 1;
        let t = self.steps as i32;
        let s = self.settings;
        let k = Coefficients {
            decay: 1.0 - lr * s.weight_decay,
            step_size: lr / (1.0 - s.beta_1.powi(t)),
            inv_sqrt_correction_2: 1.0 / (1.0 - s.beta_2.powi(t)).sqrt(),
            beta_1: s.beta_1,
            beta_2: s.beta_2,
            epsilon: s.epsilon,
        };
        let clip: Option<Tensor<2>> = clip.map(|c| c.reshape([1, 1]));
        for layer in 0..model.layers.len() {
            for target in LoraTarget::ALL {
                let Some(mut ad) = model.linear_mut(layer, target).lora.take() else {
                    continue;
                };
                ad.lora_a = self.update(ad.lora_a, &mut grads, clip.as_ref(), &k);
                ad.lora_b = self.update(ad.lora_b, &mut grads, clip.as_ref(), &k);
                model.linear_mut(layer, target).lora = Some(ad);
            }
        }
        model
    }

    /// Updates one factor (its moments kept by value, so that fusion may write them in place).
    fn update(
        &mut self,
        param: Param<Tensor<2>>,
        grads: &mut GradientsParams,
        clip: Option<&Tensor<2>>,
        k: &Coefficients,
    ) -> Param<Tensor<2>> {
        let id = param.id;
        let Some(grad) = grads.remove::<2>(id) else {
            return param;
        };
        let g = match clip {
            Some(c) => grad * c.clone(),
            None => grad,
        };
        let (m, v) = match self.moments.remove(&id) {
            Some(Moments {
                exp_avg,
                exp_avg_sq,
            }) => (
                exp_avg.mul_scalar(k.beta_1) + g.clone().mul_scalar(1.0 - k.beta_1),
                exp_avg_sq.mul_scalar(k.beta_2) + g.square().mul_scalar(1.0 - k.beta_2),
            ),
            // Zero-initialised moments after their first update.
            None => (
                g.clone().mul_scalar(1.0 - k.beta_1),
                g.square().mul_scalar(1.0 - k.beta_2),
            ),
        };
        let denom = v
            .clone()
            .sqrt()
            .mul_scalar(k.inv_sqrt_correction_2)
            .add_scalar(k.epsilon);
        let delta = m.clone().mul_scalar(k.step_size) / denom;
        self.moments.insert(
            id,
            Moments {
                exp_avg: m,
                exp_avg_sq: v,
            },
        );
        param.map(|p| {
            let require_grad = p.is_require_grad();
            let updated = p.inner();
            let updated = if k.decay == 1.0 {
                updated
            } else {
                updated.mul_scalar(k.decay)
            } - delta;
            let updated = Tensor::from_inner(updated);
            if require_grad {
                updated.require_grad()
            } else {
                updated
            }
        })
    }
}

/// The scalars of one step.
struct Coefficients {
    decay: f64,
    step_size: f64,
    inv_sqrt_correction_2: f64,
    beta_1: f64,
    beta_2: f64,
    epsilon: f64,
}
