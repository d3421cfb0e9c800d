//! Benchmarks of any architecture without its checkpoint: `--architecture CONFIG.json
//! --random-weights` builds the model with random weights drawn on the device in the requested
//! dtype (Llama-3.1-8B's config in bf16, say) and times LoRA training steps on fixed-shape,
//! EnronQA-length batches of random tokens, or greedy generation from random prompts.
//!
//! Figures: tokens/s (every token of the batch), model FLOP/s and MFU against a stated peak
//! (`--peak-tflops`, else the dense bf16/f16 — or TF32, for f32 — tensor peak of a known GPU),
//! and peak device memory (the allocator's reserved bytes where the backend reports them, the
//! process's peak RSS on the CPU) beside the memory planner's estimate for the same shape
//! (`engram_experiments::lora_training_bytes`, what `sweep --dry-run` and the "not
//! enough memory" check use) and their ratio. Training FLOPs per step count the matmuls:
//! forward and input gradients through the frozen blocks (4 × block parameters per token),
//! forward and both gradients of the adapters (6 × adapter parameters per token), the
//! language-model head on the label positions only (4 × vocab × hidden each, as engram's loss computes it), and
//! attention scores (forward and backward, 3 × 4 × layers × heads × head_dim × seq² per row).
//! Ops and syncs per optimizer step: kernel launches (CubeCL's launch observer, so GPU backends
//! only; fused Burn ops count once) and device-to-host reads issued by engram's training code,
//! over the timed steps, by kernel, and for one more step by phase ([`crate::phases`]). Step
//! losses are read as the trainer reads them: once per `log_every` steps.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::tensor::Device;
use engram_experiments::{human_bytes, lora_parameters, lora_training_bytes};
use engram_lora::TrainConfig;
use engram_lora::TrainExample;
use engram_lora::{LossLog, ReadError, host_reads, step_span};
use engram_lora::{gradients, optimizer};
use engram_model::kernel_cache;
use engram_model::memory_hint;
use engram_model::{
    GenerationConfig, LaunchCounter, Llama, LlamaConfig, LoraConfig, LoraTarget, Sampling,
    WeightDType, device_label, device_memory, generate, open_device,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::Out;
use crate::phases::{Phase, step_phases};

/// Dense peaks in TFLOP/s (no sparsity) of known GPUs: (name fragment, bf16/f16 tensor cores,
/// TF32 tensor cores, f32 without them). The first fragment the device's name contains wins.
const PEAKS: [(&str, f64, f64, f64); 6] = [
    ("H200", 989.4, 494.7, 66.9),
    ("H100 PCIe", 756.0, 378.0, 51.2),
    ("H100", 989.4, 494.7, 66.9),
    ("A100", 312.0, 156.0, 19.5),
    ("L40S", 362.1, 183.0, 91.6),
    ("A10G", 70.0, 35.0, 31.2),
];

/// The peak of the device named `name` for weights in `dtype`, if it is a known GPU: f32's
/// TF32 peak, or its plain f32 one where TF32 is turned off (`ENGRAM_TF32=off`).
pub fn known_peak_tflops(name: &str, dtype: WeightDType) -> Option<f64> {
    let tf32 = engram_model::cuda_tf32() != Some(false);
    PEAKS
        .iter()
        .find(|(fragment, ..)| name.contains(fragment))
        .map(|&(_, half, tensor_f32, plain_f32)| match dtype {
            WeightDType::F32 if tf32 => tensor_f32,
            WeightDType::F32 => plain_f32,
            _ => half,
        })
}

/// The architecture in `path` (an HF `config.json`).
pub fn architecture(path: &Path) -> Result<LlamaConfig> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let v: Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
    Ok(LlamaConfig::from_hf_json(&v, &path.display().to_string())?)
}

/// The bytes the device's allocator holds now (`None` where the backend does not say).
pub(crate) fn reserved(device: &Device) -> Option<u64> {
    device.memory_pool_usage().map(|u| u.bytes_reserved)
}

/// Peak memory so far: the device allocator's high-water mark `seen`, else the process's peak
/// RSS.
fn peak_memory(seen: Option<u64>) -> (f64, &'static str) {
    match seen {
        Some(b) => (b as f64, "device allocator, reserved"),
        None => (
            crate::child::own_peak_rss_mb().map_or(f64::NAN, |mb| mb * 1e6),
            "process peak RSS",
        ),
    }
}

/// Matmul FLOPs of one LoRA training step (see the module docs).
pub fn train_step_flops(
    cfg: &LlamaConfig,
    adapter_params: f64,
    batch: usize,
    seq: usize,
    labels: usize,
) -> f64 {
    let (h, i) = (cfg.hidden_size as f64, cfg.intermediate_size as f64);
    let q = (cfg.num_attention_heads * cfg.head_dim) as f64;
    let kv = (cfg.num_key_value_heads * cfg.head_dim) as f64;
    let layers = cfg.num_hidden_layers as f64;
    let block = layers * (h * q + 2.0 * h * kv + q * h + 3.0 * h * i);
    let tokens = (batch * seq) as f64;
    let scores = 3.0 * 4.0 * layers * q * (seq * seq) as f64 * batch as f64;
    let head = 4.0 * cfg.vocab_size as f64 * h * (batch * labels) as f64;
    tokens * (4.0 * block + 6.0 * adapter_params) + scores + head
}

/// A batch of `batch` random examples of `seq` tokens whose last `labels` are labels.
fn random_examples(
    vocab: usize,
    batch: usize,
    seq: usize,
    labels: usize,
    seed: u64,
) -> Vec<TrainExample> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..batch)
        .map(|b| TrainExample {
            id: format!("random-{b}"),
            ids: (0..seq)
                .map(|_| rng.random_range(0..vocab as u32))
                .collect(),
            prompt_len: seq - labels,
        })
        .collect()
}

/// What `bench train --random-weights` measures.
pub struct RandomTrain<'a> {
    /// The architecture file.
    pub architecture: &'a Path,
    /// Backend name.
    pub backend: &'a str,
    /// Weight dtype.
    pub dtype: WeightDType,
    /// The adapters' matmul dtype (`adapter_compute`).
    pub adapter_compute: burn::tensor::DType,
    /// Ranks.
    pub ranks: &'a [usize],
    /// Examples per step.
    pub batch: usize,
    /// Tokens per example.
    pub seq: usize,
    /// Label tokens per example.
    pub labels: usize,
    /// Untimed steps first.
    pub warmup: usize,
    /// Timed steps.
    pub steps: usize,
    /// Peak TFLOP/s for MFU.
    pub peak_tflops: Option<f64>,
    /// When the process started: the cold start is timed from it too.
    pub process_start: Instant,
    /// Also time each rank's step captured once and replayed, beside the same step's code run
    /// eagerly ([`engram_lora::CapturedStep`]).
    pub graph: bool,
}

/// Times LoRA training steps per rank; hands a table row per rank to `out` and returns the
/// figures as JSON.
pub fn random_train(spec: &RandomTrain, out: Out) -> Result<Value> {
    if spec.labels == 0 || spec.labels >= spec.seq {
        bail!(
            "--label-len must be between 1 and --seq-len − 1 (got {} of {})",
            spec.labels,
            spec.seq
        );
    }
    let cfg = architecture(spec.architecture)?;
    let device = open_device(spec.backend)?;
    // Refused before any weights are drawn, as the model would refuse it once built.
    engram_model::check_adapter_compute(&device, spec.adapter_compute)?;
    let name = device_label(&device, spec.backend);
    let peak = spec
        .peak_tflops
        .or_else(|| known_peak_tflops(&name, spec.dtype));
    let capacity = device_memory(spec.backend);
    let weight_bytes = cfg.num_parameters() as f64
        * if spec.dtype == WeightDType::F32 {
            4.0
        } else {
            2.0
        };
    say!(
        out,
        "engram bench train: {} ({:.2} B parameters, random weights, {:?}) on {} ({name}), batch {} × {} tokens ({} labels), {} timed steps after {} warm-up",
        spec.architecture.display(),
        cfg.num_parameters() as f64 / 1e9,
        spec.dtype,
        spec.backend,
        spec.batch,
        spec.seq,
        spec.labels,
        spec.steps,
        spec.warmup
    );
    say!(
        out,
        "{:>5}  {:>12}  {:>10}  {:>9}  {:>7}  {:>10}  {:>14}  {:>12}  {:>9}  {:>12}  {:>11}",
        "rank",
        "adapter",
        "tok/s",
        "step ms",
        "TFLOP/s",
        "MFU",
        "peak memory",
        "planned",
        "meas/plan",
        "launches/step",
        "reads/step"
    );
    let bench = RankBench {
        spec,
        cfg: &cfg,
        device: &device,
        peak,
        examples: random_examples(cfg.vocab_size, spec.batch, spec.seq, spec.labels, 1),
        group: vec![(0..spec.batch).collect()],
        train_cfg: TrainConfig::default(),
    };
    let mut rows = Vec::new();
    for &rank in spec.ranks {
        let adapter = lora_parameters(&cfg, rank, &LoraTarget::ALL, None) as f64;
        let (need, _) = lora_training_bytes(
            &cfg,
            adapter,
            weight_bytes,
            spec.batch as f64,
            spec.seq as f64,
        );
        if let Some(cap) = capacity
            && need > cap as f64
        {
            say!(
                out,
                "{rank:>5}  skipped: needs about {} (the planner's estimate), the device has {}",
                human_bytes(need),
                human_bytes(cap as f64)
            );
            rows.push(json!({"rank": rank, "skipped": format!("needs about {}, the device has {}", human_bytes(need), human_bytes(cap as f64))}));
            continue;
        }
        // A rank that fails (a device out of memory, a kernel that cannot launch, a loss that
        // is not finite) is a row of its own; the ranks after it are still measured.
        let mut measured = bench
            .time_steps(rank)
            .map(|timed| bench.report(rank, adapter, need, &timed, out));
        device.memory_cleanup();
        if spec.graph
            && let Ok(row) = &mut measured
        {
            let steps = spec.steps.max(3);
            match crate::captured::measure(
                || bench.model(rank),
                (&bench.examples, 0),
                &bench.train_cfg,
                &device,
                steps,
            ) {
                Ok(c) => row["captured"] = c.report(spec.batch * spec.seq, out),
                Err(e) => {
                    say!(out, "       captured step failed: {e:#}");
                    row["captured"] = json!({"failed": format!("{e:#}")});
                }
            }
            device.memory_cleanup();
        }
        match measured {
            Ok(row) => rows.push(row),
            Err(e) => {
                say!(out, "{rank:>5}  failed: {e:#}");
                rows.push(json!({"rank": rank, "failed": format!("{e:#}")}));
            }
        }
    }
    say!(
        out,
        "(MFU against {}; FLOPs count the step's matmuls: docs/src/backends-and-gpus.md)",
        peak.map_or("no known peak: pass --peak-tflops".into(), |p| format!(
            "{p} TFLOP/s"
        ))
    );
    Ok(json!({
        "bench": "train", "architecture": spec.architecture.display().to_string(),
        "backend": spec.backend, "device": name, "dtype": format!("{:?}", spec.dtype).to_lowercase(),
        "adapter_compute": format!("{:?}", spec.adapter_compute).to_lowercase(),
        "batch": spec.batch, "seq_len": spec.seq, "label_len": spec.labels, "steps": spec.steps,
        "peak_tflops": peak, "rows": rows,
        "kernels": kernel_cache::state().map(|_| kernel_cache::summary()),
    }))
}

/// What every rank of `bench train --random-weights` shares.
struct RankBench<'a> {
    spec: &'a RandomTrain<'a>,
    cfg: &'a LlamaConfig,
    device: &'a Device,
    /// The peak TFLOP/s MFU is taken against.
    peak: Option<f64>,
    examples: Vec<TrainExample>,
    /// The batch: every example.
    group: Vec<Vec<usize>>,
    train_cfg: TrainConfig,
}

/// One rank's timed steps and what was counted beside them.
struct Timed {
    /// Seconds the model took to build.
    built: f64,
    /// Seconds of the timed steps.
    secs: f64,
    /// The first optimizer step (the cold start).
    first_step: Option<FirstStep>,
    /// Launches over the timed steps (GPU backends).
    launches: Option<LaunchCounter>,
    /// Host reads over the timed steps.
    reads: u64,
    /// The allocator's high-water mark.
    high: Option<u64>,
    /// One more step's launches by phase, where there are launches to count.
    phases: Option<Vec<Phase>>,
    /// Kernels compiled and autotune decisions made for this rank.
    compiled: u64,
    autotuned: u64,
}

impl RankBench<'_> {
    /// The random model at `rank` on the training device (the same weights every time).
    fn model(&self, rank: usize) -> Result<Llama> {
        let train_device = self.device.clone().autodiff();
        Ok(
            Llama::random(self.cfg.clone(), self.spec.dtype, &train_device, 0)?
                .with_lora(&LoraConfig::new(rank))?
                .with_adapter_compute(self.spec.adapter_compute)?,
        )
    }

    /// Builds the model at `rank`, runs the warm-up and timed steps (the first one timed as the
    /// cold start), then one more step by phase.
    fn time_steps(&self, rank: usize) -> Result<Timed> {
        let (spec, device, train_cfg) = (self.spec, self.device, &self.train_cfg);
        let compiled0 = kernel_cache::activity();
        let rank_start = Instant::now();
        let mut model = self.model(rank)?;
        let mut optim = optimizer(train_cfg);
        let mut high = reserved(device);
        let mut log = LossLog::new();
        let built = rank_start.elapsed().as_secs_f64();
        let mut t0 = Instant::now();
        let (mut launches, mut reads0) = (None, host_reads());
        let mut first_step = None;
        for step in 0..spec.warmup + spec.steps {
            if step == spec.warmup {
                read_losses(&mut log, spec.dtype)?;
                let _ = device.sync();
                t0 = Instant::now();
                launches = LaunchCounter::start(device);
                reads0 = host_reads();
            }
            let g = gradients(
                &model,
                &self.examples,
                &self.group,
                (0, None),
                step,
                train_cfg,
            );
            log.push(step, 1e-4, g.labels, g.loss);
            model = optim.step(1e-4, model, g.grads);
            if step == 0 {
                // The cold start: the first optimizer step done, its kernels compiled.
                read_losses(&mut log, spec.dtype)?;
                let _ = device.sync();
                first_step = Some(FirstStep {
                    after_build_s: rank_start.elapsed().as_secs_f64() - built,
                    after_process_start_s: spec.process_start.elapsed().as_secs_f64(),
                    compiled: kernel_cache::activity().since(&compiled0).compiled,
                });
            }
            if log.pending() >= train_cfg.read_interval() {
                read_losses(&mut log, spec.dtype)?;
            }
            high = high.max(reserved(device));
        }
        read_losses(&mut log, spec.dtype)?;
        let _ = device.sync();
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        let reads = host_reads() - reads0;
        // The phase breakdown counts kernels: it costs one more step, so only where there are
        // kernels to count.
        let mut phases = None;
        if launches.is_some() {
            (_, phases) = step_phases(model, &self.examples, 0, train_cfg, &mut optim);
        }
        let compiled = kernel_cache::activity().since(&compiled0);
        Ok(Timed {
            built,
            secs,
            first_step,
            launches,
            reads,
            high,
            phases,
            compiled: compiled.compiled,
            autotuned: compiled.autotuned,
        })
    }

    /// `rank`'s row (and the lines below it) handed to `out`, and its figures as JSON.
    fn report(&self, rank: usize, adapter: f64, need: f64, t: &Timed, out: Out) -> Value {
        let spec = self.spec;
        let secs = t.secs;
        let per_step = |n: u64| n as f64 / spec.steps as f64;
        let by_kernel: Vec<(String, f64)> = t
            .launches
            .as_ref()
            .map(|c| {
                c.by_kernel()
                    .into_iter()
                    .map(|(k, n)| (k, per_step(n)))
                    .collect()
            })
            .unwrap_or_default();
        let launches = t.launches.as_ref().map(|c| per_step(c.launched()));
        let reads = per_step(t.reads);
        let tokens = (spec.batch * spec.seq * spec.steps) as f64;
        let flops = train_step_flops(self.cfg, adapter, spec.batch, spec.seq, spec.labels)
            * spec.steps as f64;
        let tflops = flops / secs / 1e12;
        let mfu = self.peak.map(|p| tflops / p);
        let (mem, mem_kind) = peak_memory(t.high);
        say!(
            out,
            "{rank:>5}  {:>12}  {:>10.1}  {:>9.1}  {:>7.2}  {:>10}  {:>14}  {:>12}  {:>9.2}  {:>12}  {:>11.2}",
            adapter as u64,
            tokens / secs,
            1e3 * secs / spec.steps as f64,
            tflops,
            mfu.map_or("-".into(), |m| format!("{:.1} %", 100.0 * m)),
            human_bytes(mem),
            human_bytes(need),
            mem / need,
            launches.map_or("-".into(), |l| format!("{l:.1}")),
            reads
        );
        let (built, kernels_compiled, autotuned) = (t.built, t.compiled, t.autotuned);
        if let Some(f) = &t.first_step {
            say!(
                out,
                "       model built in {built:.1} s; first step done {:.1} s later ({:.1} s after the process started, {} kernels compiled for it); {kernels_compiled} kernels compiled and {autotuned} autotune decisions for this rank",
                f.after_build_s,
                f.after_process_start_s,
                f.compiled
            );
        }
        if !by_kernel.is_empty() {
            say!(
                out,
                "       launches/step by kernel: {}",
                top(&by_kernel, 6)
            );
        }
        for p in t.phases.iter().flatten() {
            say!(
                out,
                "       one more step, {:<8} {:>5} launches: {}",
                p.name,
                p.launches,
                top(&p.by_kernel, 4)
            );
            say!(out, "{:>35}{}", "", device_time_line(p));
        }
        let step_ms = 1e3 * secs / spec.steps as f64;
        let busy_ms = device_busy_ms(t.phases.as_deref());
        if let Some(busy) = busy_ms {
            // Timing a launch costs the host a round trip, so the phases' own wall times
            // overstate the device's idling; the timed steps' length is the fair comparison.
            say!(
                out,
                "       the device was busy {busy:.1} ms of that step's kernels, {:.0} % of a timed step ({step_ms:.1} ms): {}",
                100.0 * busy / step_ms,
                bound(busy / step_ms)
            );
        }
        let first_step = t.first_step.as_ref();
        json!({
            "rank": rank, "adapter_params": adapter as u64, "tokens_per_s": tokens / secs,
            "step_ms": step_ms, "tflops": tflops, "mfu": mfu,
            "peak_memory_bytes": if mem.is_finite() { json!(mem) } else { json!(null) },
            "memory_kind": mem_kind, "planned_peak_bytes": need,
            "kernel_launches_per_step": launches,
            "kernel_launches_by_phase": t.phases.iter().flatten().map(phase_json).collect::<Vec<_>>(),
            "device_busy_ms_per_step": busy_ms,
            "kernel_launches_per_step_by_kernel": kernels_json(&by_kernel),
            "host_reads_per_step": reads,
            "model_built_s": built,
            "first_step_s": first_step.map(|f| f.after_build_s),
            "first_step_after_process_start_s": first_step.map(|f| f.after_process_start_s),
            "kernels_compiled_first_step": first_step.map(|f| f.compiled),
            "kernels_compiled": kernels_compiled,
            "autotune_decisions": autotuned,
        })
    }
}

/// The cold start of one rank's run: its first optimizer step.
struct FirstStep {
    /// Seconds from the model built to the first step's loss read.
    after_build_s: f64,
    /// Seconds from the process's start to the same point.
    after_process_start_s: f64,
    /// Kernels compiled for it.
    compiled: u64,
}

/// The `n` most launched kernels of `tally` (most launched first), as `Name count, …`.
fn top<N: std::fmt::Display>(tally: &[(String, N)], n: usize) -> String {
    let top: Vec<String> = tally
        .iter()
        .take(n)
        .map(|(k, c)| format!("{k} {c:.1}"))
        .collect();
    top.join(", ")
}

/// Where one phase's device time went: `device 118.0 of 130.2 ms (91 % busy): MatmulEntry 80.1
/// ms, …` (kernel lengths summed where the windows have no place on the timeline; "host-timed"
/// where the backend could not stamp them on the device).
fn device_time_line(p: &Phase) -> String {
    let t = &p.times;
    let ms = |s: f64| 1e3 * s;
    let busy = match t.busy_seconds() {
        Some(b) => format!(
            "device {:.1} of {:.1} ms ({:.0} % busy)",
            ms(b),
            ms(p.wall_s),
            100.0 * b / p.wall_s.max(1e-12)
        ),
        None => format!(
            "kernels {:.1} ms of {:.1} ms",
            ms(t.kernel_seconds()),
            ms(p.wall_s)
        ),
    };
    let clock = if t.device_clock { "" } else { ", host-timed" };
    let kernels: Vec<String> = t
        .by_kernel()
        .iter()
        .take(4)
        .map(|k| format!("{} {:.1} ms", k.kernel, ms(k.seconds)))
        .collect();
    format!("{busy}{clock}: {}", kernels.join(", "))
}

/// What bounds a step whose device was busy `busy` of its time (a fraction).
fn bound(busy: f64) -> &'static str {
    if busy >= 0.8 {
        "the kernels bound the step"
    } else if busy < 0.5 {
        "the host bounds the step (the device waits for launches)"
    } else {
        "the host and the kernels both bound the step"
    }
}

/// The device's busy time over all of one step's phases (ms), where every phase's launches
/// have a place on the device's timeline.
fn device_busy_ms(phases: Option<&[Phase]>) -> Option<f64> {
    phases?
        .iter()
        .map(|p| p.times.busy_seconds().map(|s| 1e3 * s))
        .sum()
}

/// One phase's launches and device time as JSON: by kernel, by time, and each launch's start
/// and length (µs, launch order, beside `sequence`'s names).
fn phase_json(p: &Phase) -> Value {
    let t = &p.times;
    let us = |s: f64| (1e6 * s).round();
    json!({
        "phase": p.name, "launches": p.launches, "by_kernel": kernels_json(&p.by_kernel),
        "sequence": p.sequence,
        "wall_ms": 1e3 * p.wall_s,
        "device_busy_ms": t.busy_seconds().map(|s| 1e3 * s),
        "device_span_ms": t.span_seconds().map(|s| 1e3 * s),
        "kernel_ms": 1e3 * t.kernel_seconds(),
        "device_clock": t.device_clock,
        "untimed_launches": t.untimed,
        "by_time": t.by_kernel().iter().map(|k| json!({
            "kernel": k.kernel, "launches": k.launches, "ms": 1e3 * k.seconds,
        })).collect::<Vec<_>>(),
        "timed_sequence": t.launches.iter().map(|l| &l.kernel).collect::<Vec<_>>(),
        "launch_start_us": t.launches.iter().map(|l| l.start_s.map(us)).collect::<Vec<_>>(),
        "launch_us": t.launches.iter().map(|l| us(l.seconds)).collect::<Vec<_>>(),
    })
}

/// `tally` as `[{"kernel", "launches"}]`.
fn kernels_json<N: Copy + Into<Value>>(tally: &[(String, N)]) -> Vec<Value> {
    tally
        .iter()
        .map(|(k, n)| json!({"kernel": k, "launches": (*n).into()}))
        .collect()
}

/// Reads the pending step losses; a non-finite one is an error naming the step, as is a
/// device that failed running them (with what to change where it ran out of memory).
fn read_losses(log: &mut LossLog, dtype: WeightDType) -> Result<()> {
    log.read().map(|_| ()).map_err(|e| match e {
        ReadError::NonFinite(s) => anyhow::anyhow!(
            "the loss became {} at step {} (random weights in {dtype:?})",
            s.loss,
            s.step
        ),
        ReadError::Device {
            first_step,
            last_step,
            message,
        } => anyhow::anyhow!(
            "the device failed running {}: {message}{}",
            step_span(first_step + 1, last_step + 1),
            memory_hint(&message, "try a smaller --batch, --seq-len or rank")
        ),
    })
}

/// What `bench generate --random-weights` measures.
pub struct RandomGenerate<'a> {
    /// The architecture file.
    pub architecture: &'a Path,
    /// Backend name.
    pub backend: &'a str,
    /// Weight dtype.
    pub dtype: WeightDType,
    /// Batch sizes.
    pub batches: &'a [usize],
    /// Random prompt tokens per row.
    pub prompt_len: usize,
    /// New tokens per row.
    pub new_tokens: usize,
}

/// Times greedy generation from random prompts at each batch size; hands a table row per batch
/// to `out` and returns the figures as JSON.
pub fn random_generate(spec: &RandomGenerate, out: Out) -> Result<Value> {
    let RandomGenerate {
        architecture: architecture_file,
        backend,
        dtype,
        batches,
        prompt_len,
        new_tokens,
    } = *spec;
    let cfg = architecture(architecture_file)?;
    let device = open_device(backend)?;
    let name = device_label(&device, backend);
    let model = Llama::random(cfg.clone(), dtype, &device, 0)?;
    say!(
        out,
        "engram bench generate: {} (random weights, {dtype:?}) on {backend} ({name}), {prompt_len}-token prompts, {new_tokens} new tokens, greedy",
        architecture_file.display()
    );
    say!(
        out,
        "{:>5}  {:>14} {:>14}",
        "batch",
        "prefill tok/s",
        "decode tok/s"
    );
    let mut rng = StdRng::seed_from_u64(2);
    let gen_cfg = GenerationConfig {
        max_new_tokens: new_tokens,
        sampling: Sampling::Greedy,
        stop_ids: vec![],
        ..Default::default()
    };
    let mut rows = Vec::new();
    let mut high = reserved(&device);
    for &b in batches {
        let prompts: Vec<Vec<u32>> = (0..b)
            .map(|_| {
                (0..prompt_len)
                    .map(|_| rng.random_range(0..cfg.vocab_size as u32))
                    .collect()
            })
            .collect();
        let _ = generate(
            &model,
            &prompts[..1],
            &GenerationConfig {
                max_new_tokens: 2,
                ..gen_cfg.clone()
            },
        )?;
        let g = generate(&model, &prompts, &gen_cfg)?;
        high = high.max(reserved(&device));
        let (p, d) = (
            g.prefill_tokens as f64 / g.prefill_secs.max(1e-9),
            g.decode_tokens as f64 / g.decode_secs.max(1e-9),
        );
        say!(out, "{b:>5}  {p:>14.1} {d:>14.1}");
        rows.push(json!({"batch": b, "prefill_tokens_per_s": p, "decode_tokens_per_s": d}));
    }
    let (mem, kind) = peak_memory(high);
    say!(out, "peak memory: {} ({kind})", human_bytes(mem));
    Ok(json!({
        "bench": "generate", "architecture": architecture_file.display().to_string(),
        "backend": backend, "device": name, "dtype": format!("{dtype:?}").to_lowercase(),
        "prompt_len": prompt_len, "new_tokens": new_tokens, "rows": rows,
        "peak_memory_bytes": if mem.is_finite() { json!(mem) } else { json!(null) },
    }))
}
