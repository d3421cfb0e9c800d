//! One optimizer step captured once and replayed: on CUDA a CUDA graph, on wgpu CubeCL's
//! software graph (the recorded dispatches re-encoded), elsewhere the step run again. A replay
//! launches the step's kernels with none of the host work that issues them — Burn's autodiff
//! tape, fusion's planning, CubeCL's launch path — which on a GPU is most of a small step's
//! time (an eager 8B step at r 8 issues about 3,000 launches).
//!
//! What makes a step replayable ([`engram_ops::graph`]): its batches are uploaded once
//! ([`BatchInputs`]); the adapters' values and AdamW's moments are written back into the
//! buffers they were read from ([`AdamW::step_in_place`]); AdamW's bias corrections come from
//! a step counter on the device, which the step advances; and the dropout masks are drawn from
//! a stream keyed by that counter ([`engram_model::keyed_dropout`]). Two
//! deviations from the eager step follow, both on the GPU backends only: the masks are another
//! stream than Burn's generator draws (the same distribution), and the bias corrections are
//! rounded in f32 as `torch.optim.AdamW(capturable=True)` rounds them.
//!
//! A step captured over fixed batches ([`CapturedStep::new`]) repeats them — what a benchmark's
//! steps are. A run's step ([`CapturedStep::train`]) reads its batches, learning rate and label
//! count from buffers that stay in place ([`StepSlots`]), each step's written into them before
//! it runs, all in the run's one [`crate::fixed_steps::StepShape`].

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use burn::tensor::{DType, Graph, Tensor, TensorData, capture};
use engram_model::Llama;
use engram_model::keyed_dropout;
use engram_ops::graph::assign;

use crate::adamw::AdamW;
use crate::config::TrainConfig;
use crate::fixed_steps::{StepData, StepShape, StepSlots};
use crate::loss::BatchInputs;
use crate::step::{Unobserved, inputs_gradients};

/// Dropout keys per step: micro-batch `i` of step `t` draws the stream `t · KEYS_PER_STEP + i`.
const KEYS_PER_STEP: f64 = 64.0;

/// The most micro-batches (`grad_accum`) a step of [`CapturedStep`] takes: one dropout key
/// each.
pub(crate) const MAX_MICRO_BATCHES: usize = KEYS_PER_STEP as usize;

/// Steps taken when [`CapturedStep::new`] returns: Burn's `capture` runs the step three times to
/// warm up (so that every buffer the recording reuses exists) and then records it without
/// executing it (as a CUDA stream capture records); an eager step takes as many, so that both
/// start their replays at the same step.
pub const WARM_UP_STEPS: usize = 3;

/// What a captured step reads.
enum Source {
    /// The same micro-batches every step (`labels` label tokens in all) at one learning rate.
    Fixed {
        inputs: Vec<BatchInputs>,
        labels: usize,
        lr: Box<Tensor<1>>,
    },
    /// A run's steps: the slots, and the steps waiting to be written into them before the
    /// step's code next runs (the warm-up's, and where no graph replays, every step's).
    Slots {
        slots: Box<StepSlots>,
        pending: VecDeque<StepData>,
    },
}

/// What a captured step carries from one run to the next.
struct Carried {
    model: Option<Llama>,
    optim: AdamW,
    /// The step number, `[1]` f32 on the device (not tracked by autodiff).
    step: Tensor<1>,
    /// Times the step's code ran (warm-up runs, the capture, eager replays).
    runs: u64,
    source: Source,
    /// The losses of the runs that took a pending step, not yet taken by
    /// [`CapturedStep::take_losses`].
    losses: Vec<Tensor<1>>,
}

impl Carried {
    /// The optimizer's step count once the device has taken `taken` steps since the capture
    /// began: the optimizer counted every run of the step's code, the recording included, and
    /// no replay of a graph.
    fn optimizer_steps(&self, taken: u64) -> u64 {
        self.optim.steps() - self.runs + taken
    }
}

type StepFn = Box<dyn FnMut() -> Tensor<1>>;

/// How replays run.
enum Runner {
    /// A captured graph (or Burn's fallback, which runs the code again).
    Graph(Box<Graph<Tensor<1>, StepFn>>),
    /// The step's code, run again each time (no capture asked for).
    Eager(StepFn),
}

/// An optimizer step captured for replay ([`CapturedStep::new`]).
pub struct CapturedStep {
    runner: Runner,
    carried: Rc<RefCell<Carried>>,
    replays: u64,
}

impl CapturedStep {
    /// Captures the optimizer step of `model` over the micro-batches `inputs` (`labels` label
    /// tokens in all) at learning rate `lr`: `model` and `optim` are three real steps further on
    /// when this returns (Burn's warm-up; four where the backend has no graphs and Burn runs
    /// the recording too). With `graph` false the step is not captured: it runs its three steps
    /// and each replay runs the same step's code — the eager baseline of a benchmark, and the
    /// reference a test holds replays to.
    ///
    /// # Panics
    /// When `inputs` is empty or holds more than 64 micro-batches (the dropout keys of one
    /// step).
    pub fn new(
        model: Llama,
        optim: AdamW,
        inputs: Vec<BatchInputs>,
        labels: usize,
        cfg: &TrainConfig,
        lr: f64,
        graph: bool,
    ) -> Self {
        assert!(
            !inputs.is_empty() && inputs.len() <= KEYS_PER_STEP as usize,
            "a captured step has 1 to 64 micro-batches"
        );
        let device = model.device().inner();
        let lr =
            Tensor::<1>::from_data(TensorData::new(vec![lr as f32], [1]), (&device, DType::F32));
        let source = Source::Fixed {
            inputs,
            labels,
            lr: Box::new(lr),
        };
        Self::build(model, optim, source, cfg, graph)
    }

    /// Captures a run's optimizer step: `warm_up` (three steps, [`WARM_UP_STEPS`]) are written
    /// into `slots` one after the other and taken by Burn's warm-up runs, whose losses
    /// [`CapturedStep::take_losses`] returns; every later step is given to
    /// [`CapturedStep::replay_step`]. With `graph` false nothing is captured and every step
    /// runs the step's code (the CPU backend, which has no graphs).
    ///
    /// # Panics
    /// When `warm_up` does not hold three steps, or a step more than 64 micro-batches.
    pub fn train(
        model: Llama,
        optim: AdamW,
        slots: StepSlots,
        warm_up: Vec<StepData>,
        cfg: &TrainConfig,
        graph: bool,
    ) -> Self {
        assert_eq!(warm_up.len(), WARM_UP_STEPS, "the capture's warm-up steps");
        assert!(
            slots.shape().micro <= KEYS_PER_STEP as usize,
            "at most 64 micro-batches"
        );
        let source = Source::Slots {
            slots: Box::new(slots),
            pending: warm_up.into(),
        };
        Self::build(model, optim, source, cfg, graph)
    }

    fn build(model: Llama, optim: AdamW, source: Source, cfg: &TrainConfig, graph: bool) -> Self {
        let device = model.device().inner();
        let step = Tensor::<1>::from_data(
            TensorData::new(vec![optim.steps() as f32], [1]),
            (&device, DType::F32),
        );
        let carried = Rc::new(RefCell::new(Carried {
            model: Some(model),
            optim,
            step,
            runs: 0,
            source,
            losses: Vec::new(),
        }));
        let state = carried.clone();
        let cfg = cfg.clone();
        let mut run: StepFn = Box::new(move || {
            let mut c = state.borrow_mut();
            let c = &mut *c;
            let model = c.model.take().expect("the model between runs");
            let next = c.step.clone().add_scalar(1.0);
            c.step = assign(c.step.clone(), next);
            let step = c.step.clone();
            let key = |micro: usize| {
                keyed_dropout(
                    step.clone()
                        .mul_scalar(KEYS_PER_STEP)
                        .add_scalar(micro as f64),
                )
            };
            let (inputs, labels, lr, fresh) = match &mut c.source {
                Source::Fixed { inputs, labels, lr } => {
                    (inputs.clone(), *labels, (**lr).clone(), false)
                }
                Source::Slots { slots, pending } => {
                    let fresh = pending.pop_front();
                    if let Some(data) = &fresh {
                        slots.write(data);
                    }
                    // The slots' loss is scaled by the step's `1 / labels` on the device.
                    (slots.inputs(), 1, slots.lr(), fresh.is_some())
                }
            };
            let g = inputs_gradients(&model, &inputs, (labels, 0), key, &cfg, &mut Unobserved);
            let model = c.optim.step_in_place(&lr, model, g.grads, &step);
            c.model = Some(model);
            c.runs += 1;
            let loss = g.loss.inner();
            if fresh {
                c.losses.push(loss.clone());
            }
            loss
        });
        let runner = if graph {
            Runner::Graph(Box::new(capture(&device, run)))
        } else {
            for _ in 0..WARM_UP_STEPS {
                run();
            }
            Runner::Eager(run)
        };
        Self {
            runner,
            carried,
            replays: 0,
        }
    }

    /// Takes `data`, a run's next step ([`CapturedStep::train`]), and returns its loss as
    /// [`CapturedStep::replay`] does: written into the slots, then the graph replayed (or, with
    /// no graph, given to the step's code).
    ///
    /// # Panics
    /// On a step captured over fixed batches ([`CapturedStep::new`]).
    pub fn replay_step(&mut self, data: StepData) -> Tensor<1> {
        let hardware = self.is_hardware();
        {
            let mut c = self.carried.borrow_mut();
            let Source::Slots { slots, pending } = &mut c.source else {
                panic!("replay_step: this step was captured over fixed batches")
            };
            if hardware {
                slots.write(&data);
            } else {
                pending.push_back(data);
            }
        }
        let loss = self.replay();
        if !hardware {
            // The step's code kept its loss as a pending step's.
            self.carried.borrow_mut().losses.pop();
        }
        loss
    }

    /// The step shape of a run's capture ([`CapturedStep::train`]); `None` over fixed batches.
    pub fn shape(&self) -> Option<StepShape> {
        match &self.carried.borrow().source {
            Source::Slots { slots, .. } => Some(slots.shape()),
            Source::Fixed { .. } => None,
        }
    }

    /// The losses of the warm-up steps [`CapturedStep::train`] took, in order (taken once).
    pub fn take_losses(&mut self) -> Vec<Tensor<1>> {
        std::mem::take(&mut self.carried.borrow_mut().losses)
    }

    /// The device the model is on.
    pub fn device(&self) -> burn::tensor::Device {
        let c = self.carried.borrow();
        c.model.as_ref().expect("the model between runs").device()
    }

    /// `f` on the model and optimizer as they stand after every step taken (a checkpoint's or
    /// an evaluation's view), the graph kept.
    pub fn with_state<R>(&self, f: impl FnOnce(&Llama, &AdamW) -> R) -> R {
        let taken = self.steps();
        let mut c = self.carried.borrow_mut();
        let counted = c.optim.steps();
        let settled = c.optimizer_steps(taken);
        c.optim.set_steps(settled);
        let out = f(c.model.as_ref().expect("the model between runs"), &c.optim);
        c.optim.set_steps(counted);
        out
    }

    /// Runs the step again: one launch of the recorded graph where the backend has graphs (see
    /// [`CapturedStep::is_hardware`]), else the step's code. Returns its loss, a `[1]` device
    /// tensor of its own (the graph's output buffer is copied: the next replay overwrites it).
    ///
    /// Safety holds by construction: every buffer the graph reads or writes belongs to the
    /// model, the optimizer, the batches or the step counter this value owns until
    /// [`CapturedStep::finish`], and the replay is issued on the thread that captured it.
    pub fn replay(&mut self) -> Tensor<1> {
        self.replays += 1;
        // SAFETY: see above — the captured buffers live as long as `self`, nothing else uses
        // them, and the replay and the copy of its output are issued from this thread, in order.
        match &mut self.runner {
            Runner::Graph(graph) => unsafe { graph.replay() }.clone().mul_scalar(1.0),
            Runner::Eager(run) => run(),
        }
    }

    /// Whether replays launch a recorded graph (`false`: the capture did not take and each
    /// replay runs the step's code again, which is still correct).
    pub fn is_hardware(&self) -> bool {
        matches!(&self.runner, Runner::Graph(g) if g.is_hardware())
    }

    /// Steps the device has taken since [`CapturedStep::new`] began: the runs of the step's code
    /// that executed and the graph's replays. A graph's recording run is not executed
    /// (see `new`), so its first replay takes the fourth step.
    pub fn steps(&self) -> u64 {
        let runs = self.carried.borrow().runs;
        if self.is_hardware() {
            runs - 1 + self.replays
        } else {
            runs
        }
    }

    /// The model and optimizer after every step taken, the graph dropped.
    pub fn finish(self) -> (Llama, AdamW) {
        let taken = self.steps();
        drop(self.runner);
        let mut carried = Rc::try_unwrap(self.carried)
            .ok()
            .expect("the graph is dropped")
            .into_inner();
        let settled = carried.optimizer_steps(taken);
        carried.optim.set_steps(settled);
        (
            carried.model.expect("the model between runs"),
            carried.optim,
        )
    }
}
