//! One LoRA training step's numbers without the update — the loss of one batch and every
//! adapter factor's gradient — on adapters whose factors are drawn on the host (so that two
//! devices start from the same numbers, and with `B ≠ 0`, so that `A` has a gradient too).
//! `engram selftest` and the wgpu training test compare a GPU backend with the CPU this way;
//! [`update_probe`] does the same for a few optimizer steps on host-drawn gradients.

use std::collections::BTreeMap;

use burn::optim::GradientsParams;
use burn::tensor::{DType, Tensor, TensorData};
use engram_model::{Llama, LoraConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::adamw::ClippedGradients;
use crate::config::TrainConfig;
use crate::error::Result;
use crate::examples::TrainExample;
use crate::flat::AdapterGrads;
use crate::loss::{Batch, batch_loss};
use crate::peft::{PeftAdapter, PeftFactors};
use crate::step::optimizer;

/// The loss and gradients of one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct StepProbe {
    /// The batch's mean loss over its label tokens.
    pub loss: f64,
    /// Every factor's gradient in PEFT's orientation (`lora_A [r, in]`, `lora_B [out, r]`), by
    /// `model.layers.L.<module>.lora_A` / `…lora_B`.
    pub grads: BTreeMap<String, Vec<f32>>,
}

/// Adapters of `cfg` on every layer it names of `model`, both factors drawn uniformly from
/// ±`1/√in` (A) and ±`1/√r` (B) by a host RNG seeded with `seed`; dropout off.
pub fn host_adapter(model: &Llama, cfg: &LoraConfig, seed: u64) -> PeftAdapter {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut factors = Vec::new();
    for layer in (0..model.layers.len()).filter(|&l| cfg.adapts_layer(l)) {
        for &target in &cfg.targets {
            let lin = model.linear(layer, target);
            let (d_in, d_out, r) = (lin.d_in(), lin.d_out(), cfg.rank);
            let mut draw = |n: usize, bound: f64| -> Vec<f32> {
                (0..n)
                    .map(|_| rng.random_range(-bound..bound) as f32)
                    .collect()
            };
            factors.push(PeftFactors {
                layer,
                target,
                a: draw(r * d_in, 1.0 / (d_in as f64).sqrt()),
                b: draw(d_out * r, 1.0 / (r as f64).sqrt()),
                rank: r,
                d_in,
                d_out,
            });
        }
    }
    PeftAdapter {
        path: "host-drawn".into(),
        config: cfg.clone().with_dropout(0.0),
        base_model: None,
        factors,
    }
}

/// The loss and adapter gradients of `examples` (one batch, right-padded with `pad_id`) on
/// `model` — which must be on an autodiff device — with `adapter` attached.
pub fn gradient_probe(
    model: Llama,
    adapter: &PeftAdapter,
    examples: &[TrainExample],
    pad_id: u32,
) -> Result<StepProbe> {
    let model = adapter.apply(model)?;
    let refs: Vec<&TrainExample> = examples.iter().collect();
    let batch = Batch::new(&refs, pad_id, None);
    let loss = batch_loss(&model, &batch, batch.labels() as f64);
    let value = loss.clone().into_scalar::<f32>() as f64;
    let grads = loss.backward();
    // Burn holds A as [in, r] and B as [r, out]: PEFT's orientation is the transpose.
    let grads = model
        .adapter_factors()
        .into_iter()
        .map(|(name, p)| {
            let g = p.val().grad(&grads).map(peft_orientation);
            (name, g.unwrap_or_default())
        })
        .collect();
    Ok(StepProbe { loss: value, grads })
}

/// A factor or gradient in Burn's orientation as PEFT's (transposed), on the host.
fn peft_orientation(t: Tensor<2>) -> Vec<f32> {
    t.transpose()
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("f32 factors")
}

/// How far `b` is from the reference `a`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeDistance {
    /// `|Δloss|`.
    pub loss: f64,
    /// The largest gradient difference over all factors.
    pub grad_max_abs: f64,
    /// That difference relative to the largest gradient magnitude of `a`.
    pub grad_relative: f64,
}

impl ProbeDistance {
    /// Whether both probes were finite and agree within `tol` (relative, for the loss and for
    /// the gradients) of the reference `a`.
    pub fn within(&self, a: &StepProbe, tol: f64) -> bool {
        self.within_loss(a.loss, tol)
    }

    /// [`ProbeDistance::within`] given the reference's loss.
    pub fn within_loss(&self, reference_loss: f64, tol: f64) -> bool {
        self.loss.is_finite()
            && self.grad_relative.is_finite()
            && self.loss <= tol * reference_loss.abs().max(1.0)
            && self.grad_relative <= tol
    }
}

/// How far apart two probes are; a missing gradient, a length mismatch or a non-finite value
/// makes the distance infinite.
pub fn probe_distance(a: &StepProbe, b: &StepProbe) -> ProbeDistance {
    let (mut max_diff, mut max_abs) = (0f64, 0f64);
    let mut broken = !(a.loss.is_finite() && b.loss.is_finite());
    for (name, ga) in &a.grads {
        let gb = b.grads.get(name).map(Vec::as_slice).unwrap_or(&[]);
        broken |= ga.is_empty() || ga.len() != gb.len();
        for (&x, &y) in ga.iter().zip(gb) {
            broken |= !(x.is_finite() && y.is_finite());
            max_diff = max_diff.max((x - y).abs() as f64);
            max_abs = max_abs.max(x.abs() as f64);
        }
    }
    if broken {
        return ProbeDistance {
            loss: f64::INFINITY,
            grad_max_abs: f64::INFINITY,
            grad_relative: f64::INFINITY,
        };
    }
    ProbeDistance {
        loss: (a.loss - b.loss).abs(),
        grad_max_abs: max_diff,
        grad_relative: if max_abs > 0.0 {
            max_diff / max_abs
        } else {
            max_diff
        },
    }
}

/// Every adapter factor (PEFT's orientation, named as [`StepProbe::grads`]) after `steps`
/// steps of engram's AdamW at learning rate `lr` from `adapter` on gradients drawn on the host
/// (uniform ±1, from an RNG seeded with `seed`, new ones each step) and clipped by a factor of
/// 0.5 held on the device — the optimizer alone, so that two devices get the same inputs and
/// differ only by their float rounding (weight decay 0.01, so that it counts). `model` must
/// be on an autodiff device.
pub fn update_probe(
    model: Llama,
    adapter: &PeftAdapter,
    (steps, lr): (usize, f64),
    seed: u64,
) -> Result<BTreeMap<String, Vec<f32>>> {
    let mut model = adapter.apply(model)?;
    let cfg = TrainConfig {
        weight_decay: 0.01,
        ..TrainConfig::default()
    };
    let mut optim = optimizer(&cfg);
    let device = model.device().inner();
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..steps {
        let mut grads = GradientsParams::new();
        for (_, p) in model.adapter_factors() {
            let shape = p.shape().dims::<2>();
            let g: Vec<f32> = (0..shape[0] * shape[1])
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let g = Tensor::<2>::from_data(TensorData::new(g, shape), (&device, DType::F32));
            grads.register(p.id, g);
        }
        let clip = Some(Tensor::<1>::from_data(
            TensorData::new(vec![0.5f32], [1]),
            &device,
        ));
        let grads = AdapterGrads::gather(&model, grads);
        model = optim.step(lr, model, ClippedGradients { grads, clip });
    }
    Ok(model
        .adapter_factors()
        .into_iter()
        .map(|(name, p)| (name, peft_orientation(p.val())))
        .collect())
}

/// The largest difference between two [`update_probe`]s, in units of `scale` (`lr × steps`:
/// how far AdamW moves an element at most); infinite where a factor is missing, of another
/// length or not finite.
pub fn update_distance(
    a: &BTreeMap<String, Vec<f32>>,
    b: &BTreeMap<String, Vec<f32>>,
    scale: f64,
) -> f64 {
    let mut worst = 0f64;
    for (name, fa) in a {
        let fb = b.get(name).map(Vec::as_slice).unwrap_or(&[]);
        if fa.is_empty() || fa.len() != fb.len() {
            return f64::INFINITY;
        }
        for (&x, &y) in fa.iter().zip(fb) {
            if !(x.is_finite() && y.is_finite()) {
                return f64::INFINITY;
            }
            worst = worst.max((x - y).abs() as f64);
        }
    }
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    worst / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(loss: f64, g: &[f32]) -> StepProbe {
        StepProbe {
            loss,
            grads: BTreeMap::from([("x.lora_A".to_string(), g.to_vec())]),
        }
    }

    #[test]
    fn update_distances_are_in_units_of_the_scale_and_nan_is_never_close() {
        let f = |v: &[f32]| BTreeMap::from([("x.lora_A".to_string(), v.to_vec())]);
        assert!((update_distance(&f(&[1.0, 2.0]), &f(&[1.0, 2.5]), 0.5) - 1.0).abs() < 1e-12);
        assert!(update_distance(&f(&[1.0]), &f(&[f32::NAN]), 1.0).is_infinite());
        assert!(update_distance(&f(&[1.0]), &f(&[1.0, 2.0]), 1.0).is_infinite());
        assert!(update_distance(&f(&[1.0]), &BTreeMap::new(), 1.0).is_infinite());
    }

    #[test]
    fn distances_are_relative_and_nan_is_never_close() {
        let a = probe(2.0, &[1.0, -4.0]);
        let d = probe_distance(&a, &probe(2.0, &[1.0, -4.002]));
        assert!((d.grad_relative - 0.0005).abs() < 1e-6, "{d:?}");
        assert!(d.within(&a, 1e-3) && !d.within(&a, 1e-4));
        let nan = probe_distance(&a, &probe(2.0, &[f32::NAN, -4.0]));
        assert!(!nan.within(&a, 1.0));
        let short = probe_distance(&a, &probe(2.0, &[1.0]));
        assert!(!short.within(&a, 1.0));
    }
}
