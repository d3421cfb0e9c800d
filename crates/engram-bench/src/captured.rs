//! `bench train --graph`: a rank's optimizer step captured once and replayed as `engram train
//! --graph` runs it ([`engram_lora::CapturedStep::train`]: the batch laid out in the run's step
//! shape and written into the step's buffers before every replay), beside the same step's code
//! run eagerly from the same random model, with the losses of the two runs compared step by
//! step.

use std::time::Instant;

use anyhow::{Result, ensure};
use burn::tensor::{Device, Tensor};
use engram_experiments::human_bytes;
use engram_lora::{
    CapturedStep, StepData, StepShape, StepSlots, TrainConfig, TrainExample, WARM_UP_STEPS,
    optimizer,
};
use engram_model::Llama;
use serde_json::{Value, json};

use crate::Out;
use crate::random::reserved;

/// What `--graph` measured for one rank.
pub(crate) struct Captured {
    /// Whether replays launched a recorded graph.
    pub hardware: bool,
    /// Seconds the capture took (its warm-up steps included).
    pub capture_s: f64,
    /// Milliseconds per replayed step.
    pub graph_ms: f64,
    /// Milliseconds per step of the same code run eagerly.
    pub eager_ms: f64,
    /// The largest difference between the two runs' losses, step by step.
    pub max_loss_diff: f64,
    /// Steps compared (and timed) in each run.
    pub steps: usize,
    /// Bytes the device's allocator held after the eager run's steps and after the replays
    /// (the graph keeps every buffer it recorded), where the backend says.
    pub reserved: (Option<u64>, Option<u64>),
}

impl Captured {
    /// The lines under the rank's row, and the figures as JSON.
    pub fn report(&self, tokens_per_step: usize, out: Out) -> Value {
        let graph_tok_s = tokens_per_step as f64 / (self.graph_ms / 1e3);
        if self.hardware {
            say!(
                out,
                "       captured step: {:.1} ms a replay ({graph_tok_s:.1} tok/s), the same step run eagerly {:.1} ms: {:.2} ×; captured in {:.1} s; the losses of {} replayed steps and {} eager ones differ by at most {:.2e}{}",
                self.graph_ms,
                self.eager_ms,
                self.eager_ms / self.graph_ms,
                self.capture_s,
                self.steps,
                self.steps,
                self.max_loss_diff,
                match self.reserved {
                    (Some(e), Some(g)) => format!(
                        "; the allocator held {} replaying, {} eagerly",
                        human_bytes(g as f64),
                        human_bytes(e as f64)
                    ),
                    _ => String::new(),
                }
            );
        } else {
            say!(
                out,
                "       captured step: the capture did not take on this backend (each replay ran the step's code: {:.1} ms, eagerly {:.1} ms)",
                self.graph_ms,
                self.eager_ms
            );
        }
        json!({
            "graph": self.hardware, "capture_s": self.capture_s,
            "replay_step_ms": self.graph_ms, "replay_tokens_per_s": graph_tok_s,
            "eager_step_ms": self.eager_ms, "speedup": self.eager_ms / self.graph_ms,
            "max_loss_diff": if self.hardware { json!(self.max_loss_diff) } else { json!(null) },
            "steps_compared": self.steps,
            "reserved_bytes_eager": self.reserved.0, "reserved_bytes_replaying": self.reserved.1,
        })
    }
}

/// One run of [`measure`]: seconds to capture (or to take the first steps), milliseconds a timed
/// step, whether a graph was recorded, the timed steps' losses, the allocator's bytes after them.
struct Run {
    capture_s: f64,
    ms: f64,
    hardware: bool,
    losses: Vec<f32>,
    held: Option<u64>,
}

/// Runs the step of the model `build()` returns over `examples` (one micro-batch, padded with
/// `pad`) eagerly, then captured, each from a fresh model: the warm-up steps of
/// `CapturedStep::train`, then `steps` timed ones, each writing the batch into the step's
/// buffers first as a training run writes its next batch, whose losses are compared.
pub(crate) fn measure(
    build: impl Fn() -> Result<Llama>,
    (examples, pad): (&[TrainExample], u32),
    cfg: &TrainConfig,
    device: &Device,
    steps: usize,
) -> Result<Captured> {
    let one_batch = TrainConfig {
        batch_size: examples.len(),
        grad_accum: 1,
        ..cfg.clone()
    };
    let shape = StepShape::of_run(examples, &one_batch);
    let group = [(0..examples.len()).collect::<Vec<_>>()];
    let data = StepData::lay_out(examples, &group, pad, &shape, 1e-4);
    let run = |graph: bool| -> Result<Run> {
        let model = build()?;
        let t0 = Instant::now();
        let slots = StepSlots::new(&model, shape, &data);
        let warm_up = vec![data.clone(); WARM_UP_STEPS];
        let mut step = CapturedStep::train(model, optimizer(cfg), slots, warm_up, cfg, graph);
        drop(step.take_losses());
        let _ = device.sync();
        let capture_s = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let losses: Vec<Tensor<1>> = (0..steps).map(|_| step.replay_step(data.clone())).collect();
        let _ = device.sync();
        let ms = 1e3 * t0.elapsed().as_secs_f64() / steps as f64;
        let held = reserved(device);
        let losses = Tensor::cat(losses, 0)
            .into_data()
            .try_into_vec_as::<f32>()
            .map_err(|e| anyhow::anyhow!("reading the losses: {e:?}"))?;
        ensure!(
            losses.iter().all(|l| l.is_finite()),
            "a captured step's loss is not finite: {losses:?}"
        );
        let hardware = step.is_hardware();
        drop(step.finish());
        device.memory_cleanup();
        Ok(Run {
            capture_s,
            ms,
            hardware,
            losses,
            held,
        })
    };
    let eager = run(false)?;
    let captured = run(true)?;
    let max_loss_diff = eager
        .losses
        .iter()
        .zip(&captured.losses)
        .map(|(a, b)| (a - b).abs() as f64)
        .fold(0.0, f64::max);
    Ok(Captured {
        hardware: captured.hardware,
        capture_s: captured.capture_s,
        graph_ms: captured.ms,
        eager_ms: eager.ms,
        max_loss_diff,
        steps,
        reserved: (eager.held, captured.held),
    })
}
