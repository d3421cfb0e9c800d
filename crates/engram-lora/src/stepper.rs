//! How a run takes its optimizer steps: eagerly ([`crate::step`]), or, with `graph = true`,
//! through one step captured as a graph and replayed ([`crate::graph`]) over the run's fixed
//! step shape ([`crate::fixed_steps`]).
//!
//! The capture takes the run's first three steps as Burn's warm-up, so a process captures at
//! its first epoch when that epoch has at least four steps; every epoch has as many, so a run
//! whose epochs are shorter takes all its steps eagerly. A resumed run captures again at its
//! first epoch: the warm-up steps are the same code as the replays (bit for bit, tested), so a
//! resumed run ends on the adapter an uninterrupted one does. Where the backend has no graphs
//! (the CPU) the fixed-shape step's code runs for every step.

use std::time::Instant;

use burn::tensor::Tensor;
use engram_model::Llama;

use crate::adamw::AdamW;
use crate::config::TrainConfig;
use crate::examples::TrainExample;
use crate::fixed_steps::{StepData, StepShape, StepSlots};
use crate::graph::{CapturedStep, WARM_UP_STEPS};
use crate::schedule::LinearSchedule;
use crate::step::{Unobserved, gradients, optimizer, update};

/// What the steps of a run read.
pub(crate) struct Plan<'a> {
    pub examples: &'a [TrainExample],
    pub pad_id: u32,
    /// Packed row length (eager steps only).
    pub pack: Option<usize>,
    pub schedule: &'a LinearSchedule,
    pub cfg: &'a TrainConfig,
}

/// One optimizer step taken (its loss still on the device).
pub(crate) struct Taken {
    pub step: usize,
    pub lr: f64,
    pub labels: usize,
    pub tokens: usize,
    pub loss: Tensor<1>,
}

/// How a capture went, for the run's record and log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Captured {
    /// Whether a graph was asked for (false on the CPU backend, which has none).
    pub asked: bool,
    /// Whether replays launch a recorded graph (false: the step's code runs each time).
    pub hardware: bool,
    /// Seconds the capture took, its three warm-up steps included.
    pub seconds: f64,
}

/// The model (and, once captured, the optimizer) between steps.
pub(crate) enum Stepper {
    /// Steps taken eagerly.
    Eager(Llama),
    /// `graph = true`, not captured yet: the shape every step will take, and whether the
    /// backend records graphs.
    Waiting(Llama, StepShape, bool),
    /// The captured step (which holds the model and the optimizer).
    Captured(Box<CapturedStep>),
}

impl Stepper {
    /// Takes optimizer step `global` over `groups[i]`, or, where a capture is due and the epoch
    /// has the steps for it, captures over `groups[i..i + 3]` and takes those three. `optim` is
    /// the run's optimizer (moved into the capture). Returns the stepper after them, the steps
    /// taken, in order, and the capture when one happened.
    pub fn take(
        self,
        optim: &mut AdamW,
        groups: &[&[Vec<usize>]],
        i: usize,
        global: usize,
        plan: &Plan,
    ) -> (Self, Vec<Taken>, Option<Captured>) {
        let lay_out = |shape: &StepShape, k: usize| {
            StepData::lay_out(
                plan.examples,
                groups[i + k],
                plan.pad_id,
                shape,
                plan.schedule.at(global + k),
            )
        };
        match self {
            Stepper::Captured(mut c) => {
                let data = lay_out(&c.shape().expect("a run's capture"), 0);
                let (labels, tokens, lr) = (data.labels, data.tokens, plan.schedule.at(global));
                let loss = c.replay_step(data);
                let steps = vec![taken(global, lr, labels, tokens, loss)];
                (Stepper::Captured(c), steps, None)
            }
            Stepper::Waiting(model, shape, graph) if i + WARM_UP_STEPS < groups.len() => {
                let warm_up: Vec<StepData> =
                    (0..WARM_UP_STEPS).map(|k| lay_out(&shape, k)).collect();
                let counts: Vec<(usize, usize)> =
                    warm_up.iter().map(|d| (d.labels, d.tokens)).collect();
                let t0 = Instant::now();
                let slots = StepSlots::new(&model, shape, &warm_up[0]);
                let optim = std::mem::replace(optim, optimizer(plan.cfg));
                let mut c = CapturedStep::train(model, optim, slots, warm_up, plan.cfg, graph);
                let losses = c.take_losses();
                let captured = Captured {
                    asked: graph,
                    hardware: c.is_hardware(),
                    seconds: t0.elapsed().as_secs_f64(),
                };
                let steps = losses
                    .into_iter()
                    .zip(counts)
                    .enumerate()
                    .map(|(k, (loss, (labels, tokens)))| {
                        taken(
                            global + k,
                            plan.schedule.at(global + k),
                            labels,
                            tokens,
                            loss,
                        )
                    })
                    .collect();
                (Stepper::Captured(Box::new(c)), steps, Some(captured))
            }
            Stepper::Eager(model) => {
                let (model, steps) = eager(model, optim, groups[i], global, plan);
                (Stepper::Eager(model), steps, None)
            }
            Stepper::Waiting(model, shape, graph) => {
                let (model, steps) = eager(model, optim, groups[i], global, plan);
                (Stepper::Waiting(model, shape, graph), steps, None)
            }
        }
    }

    /// The device the model is on.
    pub fn device(&self) -> burn::tensor::Device {
        match self {
            Stepper::Eager(model) | Stepper::Waiting(model, ..) => model.device(),
            Stepper::Captured(c) => c.device(),
        }
    }

    /// `f` on the model and the optimizer as they stand (`optim`: the run's, until a capture
    /// takes it).
    pub fn with_state<R>(&self, optim: &AdamW, f: impl FnOnce(&Llama, &AdamW) -> R) -> R {
        match self {
            Stepper::Eager(model) | Stepper::Waiting(model, ..) => f(model, optim),
            Stepper::Captured(c) => c.with_state(f),
        }
    }

    /// The model after every step, the run's optimizer (`optim`) given back by a capture.
    pub fn finish(self, optim: &mut AdamW) -> Llama {
        match self {
            Stepper::Eager(model) | Stepper::Waiting(model, ..) => model,
            Stepper::Captured(c) => {
                let (model, o) = c.finish();
                *optim = o;
                model
            }
        }
    }
}

/// One eager step ([`crate::step`]) of `model` over `group`.
fn eager(
    model: Llama,
    optim: &mut AdamW,
    group: &[Vec<usize>],
    global: usize,
    plan: &Plan,
) -> (Llama, Vec<Taken>) {
    let lr = plan.schedule.at(global);
    let g = gradients(
        &model,
        plan.examples,
        group,
        (plan.pad_id, plan.pack),
        global,
        plan.cfg,
    );
    let step = taken(global, lr, g.labels, g.tokens, g.loss);
    (
        update(optim, lr, model, g.grads, &mut Unobserved),
        vec![step],
    )
}

fn taken(step: usize, lr: f64, labels: usize, tokens: usize, loss: Tensor<1>) -> Taken {
    Taken {
        step,
        lr,
        labels,
        tokens,
        loss,
    }
}
