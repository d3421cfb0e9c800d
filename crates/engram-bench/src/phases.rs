//! Where one training step's kernels go: one more, untimed step after `bench train`'s timed
//! ones — the trainer's own step ([`engram_lora::observed_gradients`], [`engram_lora::update`])
//! run under an observer that syncs the device between its phases — forward (the loss),
//! backward (the adapters' gradients), the clip factor, and the AdamW update — and counts the
//! kernels each phase launched by kernel, timing each on the device
//! ([`LaunchCounter::start_timed`]): where the step's device time goes, and how long the device
//! sat idle while the host issued the phase's work. The syncs keep fusion from merging work
//! across phases, so the phases can add up to a little more than a step's count without them.

use std::time::Instant;

use burn::tensor::Device;
use engram_lora::AdamW;
use engram_lora::TrainConfig;
use engram_lora::TrainExample;
use engram_lora::{StepObserver, StepPhase, observed_gradients, update};
use engram_model::{KernelTimes, LaunchCounter, Llama};

/// The kernels one phase of a step launched.
pub struct Phase {
    /// `forward`, `backward`, `clip`, `adamw`.
    pub name: &'static str,
    /// Launches in all.
    pub launches: u64,
    /// Launches by kernel, most launched first.
    pub by_kernel: Vec<(String, u64)>,
    /// The kernels in launch order.
    pub sequence: Vec<String>,
    /// Host seconds from the sync before the phase to the sync after it.
    pub wall_s: f64,
    /// Each launch's device time.
    pub times: KernelTimes,
}

/// Syncs the device around each phase, counts the kernels it launched and times them (none are
/// counted on a backend without kernel launches, the CPU).
struct Counting {
    device: Device,
    phases: Vec<Phase>,
}

impl StepObserver for Counting {
    fn phase<T>(&mut self, phase: StepPhase, work: impl FnOnce() -> T) -> T {
        let _ = self.device.sync();
        let counter = LaunchCounter::start_timed(&self.device);
        let t0 = Instant::now();
        let out = work();
        let _ = self.device.sync();
        let wall_s = t0.elapsed().as_secs_f64();
        if let Some(c) = counter {
            self.phases.push(Phase {
                name: phase.name(),
                launches: c.launched(),
                by_kernel: c.by_kernel(),
                sequence: c.sequence(),
                wall_s,
                times: c.kernel_times(),
            });
        }
        out
    }
}

/// One step of `optim` on `model` over `examples` (one micro-batch, padded with `pad_id`), its
/// phases counted; `None` for the phases where the device launches no kernels (the CPU).
pub fn step_phases(
    model: Llama,
    examples: &[TrainExample],
    pad_id: u32,
    cfg: &TrainConfig,
    optim: &mut AdamW,
) -> (Llama, Option<Vec<Phase>>) {
    let mut observer = Counting {
        device: model.device(),
        phases: Vec::new(),
    };
    let group = vec![(0..examples.len()).collect::<Vec<_>>()];
    let g = observed_gradients(
        &model,
        examples,
        &group,
        (pad_id, None),
        0,
        cfg,
        &mut observer,
    );
    let model = update(optim, 1e-4, model, g.grads, &mut observer);
    let phases = observer.phases;
    (model, (!phases.is_empty()).then_some(phases))
}
