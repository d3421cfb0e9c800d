//! One optimizer step: its micro-batches forward and backward (the backend RNG re-seeded from
//! (seed, step, micro-batch) before each, so dropout masks are reproducible), gradients
//! accumulated and gathered into flat buckets ([`crate::flat`]), the global norm clipped as
//! `torch.nn.utils.clip_grad_norm_` (one fused square-and-sum per bucket), and AdamW applied to
//! the adapters ([`crate::adamw`]). Nothing here reads the device: the loss stays a device
//! tensor (the trainer reads losses once per logging interval, [`crate::losses`]) and the clip
//! factor is computed on the device and applied inside the optimizer's update, as torch's
//! foreach clipping applies it without reading it.

use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::Tensor;
use engram_model::Llama;
use sha2::{Digest, Sha256};

use crate::adamw::{AdamW, AdamWSettings, ClippedGradients};
use crate::config::TrainConfig;
use crate::examples::TrainExample;
use crate::flat::AdapterGrads;
use crate::loss::{Batch, BatchInputs, inputs_loss};

/// The optimizer settings of every run: `torch.optim.AdamW`'s (β 0.9/0.999, eps 1e-8) with the
/// run's weight decay.
pub fn optimizer_settings(cfg: &TrainConfig) -> AdamWSettings {
    AdamWSettings::torch(cfg.weight_decay)
}

/// A fresh optimizer for a run of `cfg`.
pub fn optimizer(cfg: &TrainConfig) -> AdamW {
    AdamW::new(optimizer_settings(cfg))
}

/// Mixes seed, step and micro-batch into one RNG seed.
fn step_seed(seed: u64, step: usize, micro: usize) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update((step as u64).to_le_bytes());
    h.update((micro as u64).to_le_bytes());
    u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

/// What one optimizer step computed before the update.
pub struct StepGradients {
    /// Mean loss over the step's label tokens: a 1-element tensor on the device, detached
    /// (reading it waits for the step; [`crate::losses::LossLog`] batches those reads).
    pub loss: Tensor<1>,
    /// The step's label tokens.
    pub labels: usize,
    /// Non-padding tokens of the step.
    pub tokens: usize,
    /// The adapters' gradients and, when the settings clip, the factor the optimizer scales
    /// them by.
    pub grads: ClippedGradients,
}

/// The phases of one optimizer step, in order: what a [`StepObserver`] sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepPhase {
    /// A micro-batch's forward pass up to its loss.
    Forward,
    /// Its backward pass: the adapters' gradients.
    Backward,
    /// The gradients gathered into flat buckets and the clip factor computed.
    Clip,
    /// The AdamW update ([`update`]).
    Update,
}

impl StepPhase {
    /// The phase's name in figures: `forward`, `backward`, `clip`, `adamw`.
    pub fn name(self) -> &'static str {
        match self {
            StepPhase::Forward => "forward",
            StepPhase::Backward => "backward",
            StepPhase::Clip => "clip",
            StepPhase::Update => "adamw",
        }
    }
}

/// Watches the phases of a step as they run (a benchmark times them or counts their kernels);
/// the trainer runs the step under [`Unobserved`], the same code.
pub trait StepObserver {
    /// Runs `work`, which is phase `phase` of the step, and returns what it returned.
    fn phase<T>(&mut self, phase: StepPhase, work: impl FnOnce() -> T) -> T;
}

/// The observer that only runs each phase.
pub struct Unobserved;

impl StepObserver for Unobserved {
    fn phase<T>(&mut self, _: StepPhase, work: impl FnOnce() -> T) -> T {
        work()
    }
}

/// Forward and backward over the micro-batches `group` (indices into `examples`) of optimizer
/// step `step`, padded with `pad_id`, each laid out in rows of `pack` slots when given
/// ([`TrainConfig::packed_rows`]).
pub fn gradients(
    model: &Llama,
    examples: &[TrainExample],
    group: &[Vec<usize>],
    pad: (u32, Option<usize>),
    step: usize,
    cfg: &TrainConfig,
) -> StepGradients {
    observed_gradients(model, examples, group, pad, step, cfg, &mut Unobserved)
}

/// [`gradients`], each phase run through `observer`.
pub fn observed_gradients(
    model: &Llama,
    examples: &[TrainExample],
    group: &[Vec<usize>],
    (pad_id, pack): (u32, Option<usize>),
    step: usize,
    cfg: &TrainConfig,
    observer: &mut impl StepObserver,
) -> StepGradients {
    let batches: Vec<Batch> = group
        .iter()
        .map(|idx| {
            let ex: Vec<&TrainExample> = idx.iter().map(|&i| &examples[i]).collect();
            Batch::new(&ex, pad_id, pack)
        })
        .collect();
    let labels: usize = batches.iter().map(Batch::labels).sum();
    let tokens = batches.iter().map(|b| b.tokens).sum();
    let inputs: Vec<BatchInputs> = batches
        .iter()
        .map(|b| BatchInputs::upload(model, b))
        .collect();
    let device = model.device();
    let reseed = |micro| device.seed(step_seed(cfg.seed, step, micro));
    inputs_gradients(model, &inputs, (labels, tokens), reseed, cfg, observer)
}

/// [`observed_gradients`] over micro-batches already on the device (no host data travels), with
/// `before(micro)` called before each micro-batch's forward and what it returns held until that
/// micro-batch's backward is done (the trainer reseeds the backend's generator there; a
/// captured step keys its dropout masks, [`crate::graph`]). `counts` is the step's `(labels,
/// tokens)`.
pub fn inputs_gradients<G>(
    model: &Llama,
    inputs: &[BatchInputs],
    (labels, tokens): (usize, usize),
    mut before: impl FnMut(usize) -> G,
    cfg: &TrainConfig,
    observer: &mut impl StepObserver,
) -> StepGradients {
    let mut loss: Option<Tensor<1>> = None;
    let mut accum = GradientsAccumulator::<Llama>::new();
    let mut single = None;
    for (micro, batch) in inputs.iter().enumerate() {
        let guard = before(micro);
        let l = observer.phase(StepPhase::Forward, || {
            inputs_loss(model, batch, labels as f64)
        });
        let part = l.clone().detach();
        loss = Some(match loss {
            Some(sum) => sum + part,
            None => part,
        });
        let grads = observer.phase(StepPhase::Backward, || {
            GradientsParams::from_grads(l.backward(), model)
        });
        drop(guard);
        if inputs.len() == 1 {
            single = Some(grads);
        } else {
            accum.accumulate(model, grads);
        }
    }
    let (grads, clip) = observer.phase(StepPhase::Clip, || {
        let grads = AdapterGrads::gather(model, single.unwrap_or_else(|| accum.grads()));
        let clip = cfg.clip().and_then(|max| clip_factor(model, &grads, max));
        (grads, clip)
    });
    StepGradients {
        loss: loss.expect("an optimizer step has at least one micro-batch"),
        labels,
        tokens,
        grads: ClippedGradients { grads, clip },
    }
}

/// The AdamW update of `model` by `grads` at learning rate `lr`, run through `observer` as the
/// step's last phase.
pub fn update(
    optim: &mut AdamW,
    lr: f64,
    model: Llama,
    grads: ClippedGradients,
    observer: &mut impl StepObserver,
) -> Llama {
    observer.phase(StepPhase::Update, || optim.step(lr, model, grads))
}

/// The factor that scales the adapters' gradients to a global L2 norm of at most `max`, as
/// `torch.nn.utils.clip_grad_norm_`: `max / (norm + 1e-6)`, capped at 1 — and, as torch's foreach
/// path, applied to every gradient even when it is 1, so that nothing waits for the norm
/// (`None` only when no adapter has a gradient). A non-finite norm behaves as torch's does
/// without `error_if_nonfinite`: an infinite one zeroes the gradients, a NaN one makes them
/// NaN, and the next step's loss shows it.
pub fn clip_factor(model: &Llama, grads: &AdapterGrads, max: f64) -> Option<Tensor<1>> {
    let mut sums = grads.squared_sums(model);
    let total = match sums.len() {
        0 => return None,
        1 => sums.pop().expect("one sum"),
        // The buckets' sums added one to the next (element-wise, which fusion joins), where a
        // `cat` was one copy each and a `sum` three launches more.
        _ if matches!(grads, AdapterGrads::Flat { .. }) => {
            sums.into_iter().reduce(|a, b| a + b).expect("several sums")
        }
        _ => Tensor::cat(sums, 0).sum(),
    };
    Some(
        total
            .sqrt()
            .add_scalar(1e-6)
            .recip()
            .mul_scalar(max)
            .clamp_max(1.0),
    )
}
