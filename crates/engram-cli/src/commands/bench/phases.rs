//! Where one training step's kernels go: one more, untimed step after `bench train`'s timed
//! ones, with the device synced between its phases — forward (the loss), backward (the
//! adapters' gradients), the clip factor, and the AdamW update — and the kernels each phase
//! launched counted by kernel. The syncs keep fusion from merging work across phases, so the
//! phases can add up to a little more than a step's count without them.

use burn::optim::GradientsParams;
use burn::tensor::Device;
use engram_lora::TrainConfig;
use engram_lora::adamw::{AdamW, ClippedGradients};
use engram_lora::examples::TrainExample;
use engram_lora::flat::AdapterGrads;
use engram_lora::loss::{Batch, batch_loss};
use engram_lora::step::clip_factor;
use engram_model::{LaunchCounter, Llama};

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
}

/// Runs `f`, syncs `device`, and counts the kernels both launched (`None` on a backend without
/// kernel launches).
fn counted<T>(device: &Device, name: &'static str, f: impl FnOnce() -> T) -> (T, Option<Phase>) {
    let _ = device.sync();
    let counter = LaunchCounter::start(device);
    let out = f();
    let _ = device.sync();
    let phase = counter.map(|c| Phase {
        name,
        launches: c.launched(),
        by_kernel: c.by_kernel(),
        sequence: c.sequence(),
    });
    (out, phase)
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
    let device = model.device();
    let refs: Vec<&TrainExample> = examples.iter().collect();
    let batch = Batch::new(&refs, pad_id, None);
    let (loss, forward) = counted(&device, "forward", || {
        batch_loss(&model, &batch, batch.labels() as f64)
    });
    let (grads, backward) = counted(&device, "backward", || {
        GradientsParams::from_grads(loss.backward(), &model)
    });
    let ((grads, clip), clip_phase) = counted(&device, "clip", || {
        let grads = AdapterGrads::gather(&model, grads);
        let clip = cfg.clip().and_then(|max| clip_factor(&model, &grads, max));
        (grads, clip)
    });
    let (model, adamw) = counted(&device, "adamw", || {
        optim.step(1e-4, model, ClippedGradients { grads, clip })
    });
    let phases: Option<Vec<Phase>> = [forward, backward, clip_phase, adamw].into_iter().collect();
    (model, phases)
}
