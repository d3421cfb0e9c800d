//! AdamW over the adapters, one pass per bucket: the clip factor, both moments and the decayed
//! update are one chain of element-wise ops on the device, which Burn's fusion (wgpu, CUDA)
//! compiles into one kernel reading the values, their gradient and their two moments and
//! writing the values and the moments — the least memory traffic AdamW in f32 allows (28 bytes
//! per parameter and step). On a step's gathered gradients ([`crate::flat`]) that chain runs
//! once per bucket of factors laid end to end (one kernel for all 28 factors of a 2-layer model,
//! where it was one per factor), and the model's factors become views of the optimizer's
//! buckets; on per-factor gradients it runs factor by factor. Burn's `ModuleOptimizer` computes
//! the same update through a dynamic per-parameter optimizer, its state behind type-erased
//! records that only serialize as one host-side copy; here the state is plain device tensors,
//! saved tensor by tensor (`optimizer.safetensors`, PyTorch's names `exp_avg` / `exp_avg_sq`,
//! see [`crate::optimizer_state`]).
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
use engram_ops::graph::assign;

use crate::flat::{AdapterGrads, FlatLayout, Slot};

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
    pub grads: AdapterGrads,
    /// `min(1, max_norm / (‖g‖ + 1e-6))`.
    pub clip: Option<Tensor<1>>,
}

/// The optimizer's state: per factor until the first step on gathered gradients (a fresh or
/// resumed optimizer), then laid out as the gradients are ([`crate::flat`]).
#[derive(Debug, Clone)]
enum State {
    /// Moments by parameter id.
    PerFactor(HashMap<ParamId, Moments>),
    /// The factors' values (the model's factors are views of them) and, after the first
    /// update, their moments, one tensor per bucket.
    Flat {
        layout: FlatLayout,
        params: Vec<Tensor<1>>,
        moments: Option<(Vec<Tensor<1>>, Vec<Tensor<1>>)>,
    },
}

/// AdamW on a [`Llama`]'s adapter factors, keyed by their name-derived parameter ids.
///
/// On gathered gradients ([`AdapterGrads::Flat`], every training step) the update is one fused
/// pass per bucket and the model comes back with its factors as views of the optimizer's
/// buckets: the next step must get that model back (as the trainer passes it), since the
/// optimizer then updates its own copy of the values rather than gathering them again.
#[derive(Debug, Clone)]
pub struct AdamW {
    settings: AdamWSettings,
    steps: u64,
    state: State,
}

impl AdamW {
    /// A fresh optimizer (no state, step 0).
    pub fn new(settings: AdamWSettings) -> Self {
        Self::from_state(settings, 0, HashMap::new())
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
            state: State::PerFactor(moments),
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

    /// The moments of parameter `id`, once it has had a gradient (views of the buckets once
    /// laid out flat).
    pub fn moments(&self, id: ParamId) -> Option<Moments> {
        match &self.state {
            State::PerFactor(m) => m.get(&id).cloned(),
            State::Flat {
                layout,
                moments: Some((m, v)),
                ..
            } => layout
                .slots
                .iter()
                .find(|s| s.id == id)
                .map(|s| slot_moments(s, m, v)),
            State::Flat { moments: None, .. } => None,
        }
    }

    /// Number of parameters with state.
    pub fn len(&self) -> usize {
        match &self.state {
            State::PerFactor(m) => m.len(),
            State::Flat {
                layout,
                moments: Some(_),
                ..
            } => layout.slots.len(),
            State::Flat { moments: None, .. } => 0,
        }
    }

    /// Whether no parameter has state yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One step at learning rate `lr` on every adapter factor of `model` that has a gradient in
    /// `grads` (factors without one, and their state, are left as they are, as torch does).
    /// Nothing is read from the device.
    pub fn step(&mut self, lr: f64, model: Llama, grads: ClippedGradients) -> Llama {
        self.steps += 1;
        let k = Coefficients::host(&self.settings, lr, self.steps);
        self.apply(model, grads, &k, false)
    }

    /// [`AdamW::step`] as a captured step needs it ([`crate::graph`]): the bias corrections are
    /// computed on the device from `step`, a `[1]` f32 tensor holding this step's number (the
    /// caller advances it), as `torch.optim.AdamW(capturable=True)` computes them (`1 − βᵗ` in
    /// f32: off by up to about 6e-5 of `1 − β₂` on the first step, which the host computes in
    /// f64), and the new values and moments are written into the old ones' memory
    /// ([`engram_ops::graph::assign`]: the buckets' on gathered gradients, each factor's on
    /// per-factor ones), so that every step reads and writes the same buffers. The learning rate is a `[1]` device tensor too (a run writes each
    /// step's into it), and `lr · (1 / (1 − β₁ᵗ))` is rounded in f32 as torch's capturable step
    /// rounds it.
    pub fn step_in_place(
        &mut self,
        lr: &Tensor<1>,
        model: Llama,
        grads: ClippedGradients,
        step: &Tensor<1>,
    ) -> Llama {
        self.steps += 1;
        let k = Coefficients::device(&self.settings, lr, step);
        self.apply(model, grads, &k, true)
    }

    /// Sets the steps taken to what the device took where the host did not see every step (a
    /// replayed graph's, [`crate::graph`]), so that [`AdamW::steps`] stays the number of
    /// updates the state holds.
    pub(crate) fn set_steps(&mut self, steps: u64) {
        self.steps = steps;
    }

    fn apply(
        &mut self,
        model: Llama,
        grads: ClippedGradients,
        k: &Coefficients,
        in_place: bool,
    ) -> Llama {
        let ClippedGradients { grads, clip } = grads;
        match grads {
            AdapterGrads::Flat { layout, buckets } if self.lay_out(&model, &layout) => {
                self.step_flat(model, buckets, clip, k, in_place)
            }
            grads => {
                self.per_factor();
                let clip: Option<Tensor<2>> = clip.map(|c| c.reshape([1, 1]));
                self.step_per_factor(model, grads.into_per_factor(), clip.as_ref(), k, in_place)
            }
        }
    }

    /// Brings the state to `layout` (gathering `model`'s factors, and the moments when every
    /// factor has them): false when only some factors have moments, which leaves the update
    /// per factor.
    fn lay_out(&mut self, model: &Llama, layout: &FlatLayout) -> bool {
        if matches!(&self.state, State::Flat { layout: l, .. } if l == layout) {
            return true;
        }
        self.per_factor();
        let State::PerFactor(map) = &mut self.state else {
            unreachable!("just made per factor")
        };
        let complete = layout.slots.iter().all(|s| map.contains_key(&s.id));
        if !map.is_empty() && !complete {
            return false;
        }
        let device = model.device().inner();
        let values: HashMap<ParamId, Tensor<2>> = model
            .adapter_factors()
            .into_iter()
            .map(|(_, p)| (p.id, p.val().inner()))
            .collect();
        let nb = layout.buckets.len();
        let params = (0..nb)
            .map(|b| layout.gather(b, &device, |s| values[&s.id].clone()))
            .collect();
        let moments = complete.then(|| {
            let gather = |f: fn(&Moments) -> &Tensor<2>| -> Vec<Tensor<1>> {
                (0..nb)
                    .map(|b| layout.gather(b, &device, |s| f(&map[&s.id]).clone()))
                    .collect()
            };
            (gather(|m| &m.exp_avg), gather(|m| &m.exp_avg_sq))
        });
        self.state = State::Flat {
            layout: layout.clone(),
            params,
            moments,
        };
        true
    }

    /// Brings the state back to one entry per factor.
    fn per_factor(&mut self) {
        if let State::Flat {
            layout,
            moments: Some((m, v)),
            ..
        } = &self.state
        {
            let map = layout
                .slots
                .iter()
                .map(|s| (s.id, slot_moments(s, m, v)))
                .collect();
            self.state = State::PerFactor(map);
        } else if matches!(self.state, State::Flat { .. }) {
            self.state = State::PerFactor(HashMap::new());
        }
    }

    /// The update on buckets: one chain of element-wise ops per bucket; `model`'s factors become
    /// views of the new values, bucket by bucket (so that one bucket's old and new values are
    /// alive at once, not the whole adapter's).
    fn step_flat(
        &mut self,
        mut model: Llama,
        grads: Vec<Tensor<1>>,
        clip: Option<Tensor<1>>,
        k: &Coefficients,
        in_place: bool,
    ) -> Llama {
        let State::Flat {
            layout,
            params,
            moments,
        } = std::mem::replace(&mut self.state, State::PerFactor(HashMap::new()))
        else {
            unreachable!("laid out before the step")
        };
        // Slot i is factor i % 2 (A, B) of adapter i / 2, in `adapter_factors`' order.
        let owners: Vec<_> = model.adapters().iter().map(|(l, t, _)| (*l, *t)).collect();
        let (mut ms, mut vs) = (Vec::new(), Vec::new());
        let mut old_moments = moments.map(|(m, v)| (m.into_iter(), v.into_iter()));
        let mut new_params = Vec::with_capacity(params.len());
        for (b, (p, g)) in params.into_iter().zip(grads).enumerate() {
            let old = old_moments
                .as_mut()
                .map(|(m, v)| (m.next().expect("a bucket"), v.next().expect("a bucket")));
            let g = match &clip {
                Some(c) => g * c.clone(),
                None => g,
            };
            let (p, m, v) = update_into(p, g, old, k, in_place);
            for (i, slot) in layout.slots.iter().enumerate() {
                if slot.bucket != b {
                    continue;
                }
                let (layer, target) = owners[i / 2];
                let ad = model
                    .linear_mut(layer, target)
                    .lora
                    .as_mut()
                    .expect("the layout's adapter");
                let param = if i % 2 == 0 {
                    &mut ad.lora_a
                } else {
                    &mut ad.lora_b
                };
                let view = Tensor::from_inner(FlatLayout::view(slot, &p))
                    .set_require_grad(param.is_require_grad());
                *param = Param::initialized(slot.id, view);
            }
            new_params.push(p);
            ms.push(m);
            vs.push(v);
        }
        self.state = State::Flat {
            layout,
            params: new_params,
            moments: Some((ms, vs)),
        };
        model
    }

    /// The update factor by factor (`in_place`: each factor's new values and moments written
    /// into its old buffers, as the update on buckets writes them, so that a replayed step
    /// reads what the last replay wrote).
    fn step_per_factor(
        &mut self,
        mut model: Llama,
        mut grads: GradientsParams,
        clip: Option<&Tensor<2>>,
        k: &Coefficients,
        in_place: bool,
    ) -> Llama {
        let State::PerFactor(moments) = &mut self.state else {
            unreachable!("made per factor before the step")
        };
        for layer in 0..model.layers.len() {
            for target in LoraTarget::ALL {
                let Some(mut ad) = model.linear_mut(layer, target).lora.take() else {
                    continue;
                };
                ad.lora_a = update_factor(ad.lora_a, &mut grads, moments, clip, k, in_place);
                ad.lora_b = update_factor(ad.lora_b, &mut grads, moments, clip, k, in_place);
                model.linear_mut(layer, target).lora = Some(ad);
            }
        }
        model
    }
}

/// The moments of `slot`: views of its place in the buckets `m` and `v`.
fn slot_moments(slot: &Slot, m: &[Tensor<1>], v: &[Tensor<1>]) -> Moments {
    Moments {
        exp_avg: FlatLayout::view(slot, &m[slot.bucket]),
        exp_avg_sq: FlatLayout::view(slot, &v[slot.bucket]),
    }
}

/// Updates one factor (its moments kept by value, so that fusion may write them in place;
/// `in_place`: the new values and moments written into the old ones' buffers).
fn update_factor(
    param: Param<Tensor<2>>,
    grads: &mut GradientsParams,
    moments: &mut HashMap<ParamId, Moments>,
    clip: Option<&Tensor<2>>,
    k: &Coefficients,
    in_place: bool,
) -> Param<Tensor<2>> {
    let id = param.id;
    let Some(grad) = grads.remove::<2>(id) else {
        return param;
    };
    let g = match clip {
        Some(c) => grad * c.clone(),
        None => grad,
    };
    let old = moments.remove(&id).map(|m| (m.exp_avg, m.exp_avg_sq));
    param.map(|p| {
        let require_grad = p.is_require_grad();
        let (updated, exp_avg, exp_avg_sq) = update_into(p.inner(), g, old, k, in_place);
        moments.insert(
            id,
            Moments {
                exp_avg,
                exp_avg_sq,
            },
        );
        Tensor::from_inner(updated).set_require_grad(require_grad)
    })
}

/// [`update`], its results written into `p`'s and `old`'s buffers when `in_place`
/// ([`engram_ops::graph::assign`]; the first update makes the moments: their buffers are new).
fn update_into<const D: usize>(
    p: Tensor<D>,
    g: Tensor<D>,
    old: Option<(Tensor<D>, Tensor<D>)>,
    k: &Coefficients,
    in_place: bool,
) -> (Tensor<D>, Tensor<D>, Tensor<D>) {
    if !in_place {
        return update(p, g, old, k);
    }
    let (p2, m2, v2) = update(p.clone(), g, old.clone(), k);
    match old {
        Some((m, v)) => (assign(p, p2), assign(m, m2), assign(v, v2)),
        None => (assign(p, p2), m2, v2),
    }
}

/// torch's AdamW update of values `p` with (clipped) gradient `g` and moments `old` (`None`:
/// zero-initialised, their first update): the new values and moments, one chain of element-wise
/// ops that Burn's fusion compiles into one kernel.
fn update<const D: usize>(
    p: Tensor<D>,
    g: Tensor<D>,
    old: Option<(Tensor<D>, Tensor<D>)>,
    k: &Coefficients,
) -> (Tensor<D>, Tensor<D>, Tensor<D>) {
    let (m, v) = match old {
        Some((exp_avg, exp_avg_sq)) => (
            exp_avg.mul_scalar(k.beta_1) + g.clone().mul_scalar(1.0 - k.beta_1),
            exp_avg_sq.mul_scalar(k.beta_2) + g.square().mul_scalar(1.0 - k.beta_2),
        ),
        None => (
            g.clone().mul_scalar(1.0 - k.beta_1),
            g.square().mul_scalar(1.0 - k.beta_2),
        ),
    };
    let denom = k
        .inv_sqrt_correction_2
        .times(v.clone().sqrt())
        .add_scalar(k.epsilon);
    let delta = k.step_size.times(m.clone()) / denom;
    let p = match &k.decay {
        Scale::Host(d) if *d == 1.0 => p,
        decay => decay.times(p),
    } - delta;
    (p, m, v)
}

/// The scalars of one step.
struct Coefficients {
    decay: Scale,
    step_size: Scale,
    inv_sqrt_correction_2: Scale,
    beta_1: f64,
    beta_2: f64,
    epsilon: f64,
}

impl Coefficients {
    /// Step `t`'s, computed on the host in f64 (torch's default AdamW).
    fn host(s: &AdamWSettings, lr: f64, t: u64) -> Self {
        let t = t as i32;
        Self {
            decay: Scale::Host(1.0 - lr * s.weight_decay),
            step_size: Scale::Host(lr / (1.0 - s.beta_1.powi(t))),
            inv_sqrt_correction_2: Scale::Host(1.0 / (1.0 - s.beta_2.powi(t)).sqrt()),
            beta_1: s.beta_1,
            beta_2: s.beta_2,
            epsilon: s.epsilon,
        }
    }

    /// The step numbered by the device tensor `t` (`[1]`, f32): the bias corrections
    /// `1 − βᵗ = 1 − exp(t · ln β)` computed on the device in f32.
    fn device(s: &AdamWSettings, lr: &Tensor<1>, t: &Tensor<1>) -> Self {
        let correction = |beta: f64| t.clone().mul_scalar(beta.ln()).exp().neg().add_scalar(1.0);
        let decay = if s.weight_decay == 0.0 {
            Scale::Host(1.0)
        } else {
            Scale::Device(Box::new(
                lr.clone().mul_scalar(-s.weight_decay).add_scalar(1.0),
            ))
        };
        Self {
            decay,
            step_size: Scale::Device(Box::new(correction(s.beta_1).recip() * lr.clone())),
            inv_sqrt_correction_2: Scale::Device(Box::new(correction(s.beta_2).sqrt().recip())),
            beta_1: s.beta_1,
            beta_2: s.beta_2,
            epsilon: s.epsilon,
        }
    }
}

/// A factor of the update: a host scalar (a launch argument) or a `[1]` device tensor.
enum Scale {
    Host(f64),
    Device(Box<Tensor<1>>),
}

impl Scale {
    /// `x` times the factor.
    fn times<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Scale::Host(s) => x.mul_scalar(*s),
            Scale::Device(s) => x * s.as_ref().clone().reshape([1; D]),
        }
    }
}
