//! `engram selftest --backend B`: checks that a device computes what transformers computes, in
//! a minute or so, against the tiny checkpoints committed under `tests/fixtures` (made with
//! transformers by `tests/peers/make_fixtures.py`):
//!
//! 1. the device opens (a missing driver, `libdevice` or adapter is named);
//! 2. logits of both tiny checkpoints within 1e-4 of transformers' (the parity tests'
//!    tolerance) and the same greedy tokens;
//! 3. batched, left-padded generation gives each prompt's one-by-one tokens;
//! 4. one LoRA training step — the loss and every adapter gradient, with the same host-drawn
//!    factors — agrees with the CPU backend's to 1e-4 (relative), with no NaN;
//! 5. three AdamW steps from those factors on host-drawn gradients (clip factor, weight decay,
//!    the fused update) end within 1e-5 of `lr × steps` of the CPU backend's factors;
//! 6. RoPE, attention and the MLP's SwiGLU through engram's hand-written kernels, forward and
//!    gradients, in the device's half type (bf16; f16 on wgpu, whose WGSL has no bf16; joined
//!    projections' products in it and in f32) within 3e-2 (relative) of the Burn ops they
//!    replace — on CUDA the kernels' bf16 code, which no CPU test runs;
//! 7. on the GPU backends, a LoRA step (dropout on) captured once as a graph and replayed
//!    (`engram_lora::CapturedStep`: a CUDA graph; CubeCL's software graph on wgpu) takes the
//!    same steps as that step's code run eagerly: the same losses, bit for bit;
//! 8. the memory the device's allocator holds (or the process's peak RSS on the CPU).
//!
//! It exits non-zero naming every check that failed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::tensor::{DType, Device};
use engram_checkpoint::{Checkpoint, ReferenceFile};
use engram_facts::read_facts;
use engram_lora::{PeftAdapter, TrainExample, build_examples};
use engram_lora::{
    ProbeDistance, gradient_probe, host_adapter, probe_distance, update_distance, update_probe,
};
use engram_model::{
    GenerationConfig, Llama, LoraConfig, Sampling, WeightDType, device_label, generate, is_cpu,
    open_device,
};
use engram_tokenizer::ChatTokenizer;
use serde_json::json;

use crate::Out;

/// The parity tests' logit tolerance.
const LOGIT_TOL: f64 = 1e-4;
/// Relative tolerance of the LoRA step against the CPU backend.
const STEP_TOL: f64 = 1e-4;
/// The logit tolerance where f32 matmuls run on TF32 tensor cores (CUDA: cubek-matmul promotes
/// f32 operands to TF32, 10 mantissa bits, whenever the device has them; transformers' default
/// keeps f32). Measured on an H200: 1.42e-3 on tiny-f32, 3.1e-4 on tiny-bf16-tied.
const LOGIT_TOL_TF32: f64 = 5e-3;
/// The LoRA step's relative tolerance where f32 matmuls run on TF32 tensor cores: the gradient
/// goes through several TF32 products forward and back. Measured on an H200: 1.47e-2 of the
/// largest gradient (|Δloss| 5e-4 of 7.55); set after that measurement, still far below what a
/// wrong gradient gives (order 1).
const STEP_TOL_TF32: f64 = 5e-2;

/// The logit and LoRA-step tolerances for `backend`: TF32's on CUDA, f32's elsewhere and where
/// TF32 is turned off (`ENGRAM_TF32=off`).
fn tolerances(backend: &str) -> (f64, f64) {
    if engram_model::backend_kind(backend) == "cuda" && engram_model::cuda_tf32() != Some(false) {
        (LOGIT_TOL_TF32, STEP_TOL_TF32)
    } else {
        (LOGIT_TOL, STEP_TOL)
    }
}
/// Reference cases checked per checkpoint (each new shape compiles kernels on a GPU backend).
const CASES: [&str; 2] = ["short_fixed", "chat_prompt"];

/// What `engram selftest` checks (its arguments).
#[derive(clap::Args, Debug)]
pub struct Selftest {
    /// The backend to check: cpu, wgpu, cuda[:N].
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// The repository's test fixtures (tiny checkpoints with transformers' references).
    #[arg(long, default_value = "tests/fixtures")]
    pub fixtures: PathBuf,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One check's outcome.
struct Check {
    name: String,
    passed: bool,
    /// What was measured, for people.
    figure: String,
    /// The measured value, for files.
    value: f64,
    seconds: f64,
    /// GPU kernels compiled and autotune decisions made while it ran (none on the CPU).
    compiled: (u64, u64),
}

fn load(fixtures: &Path, name: &str, device: &Device) -> Result<(Llama, ChatTokenizer)> {
    let dir = fixtures.join(name);
    let ckpt = Checkpoint::open(&dir.to_string_lossy()).with_context(|| {
        format!(
            "fixture {} (run from a checkout, or pass --fixtures)",
            dir.display()
        )
    })?;
    let model = Llama::load(&ckpt, WeightDType::F32, device)?;
    Ok((model, ChatTokenizer::from_files(&ckpt.tokenizer)?))
}

fn reference(fixtures: &Path, name: &str) -> Result<ReferenceFile> {
    Ok(ReferenceFile::open(
        &fixtures.join(name).join("reference.safetensors"),
    )?)
}

fn greedy(n: usize) -> GenerationConfig {
    GenerationConfig {
        max_new_tokens: n,
        sampling: Sampling::Greedy,
        stop_ids: vec![],
        ..Default::default()
    }
}

/// Worst logit difference over [`CASES`] and whether every greedy continuation matched.
fn logits_check(fixtures: &Path, name: &str, device: &Device) -> Result<(f64, bool)> {
    let (model, _) = load(fixtures, name, device)?;
    let r = reference(fixtures, name)?;
    let (mut worst, mut same) = (0f64, true);
    for case in CASES {
        let ids = r.ids(&format!("input_ids_{case}"))?;
        let (_, want) = r.f32(&format!("logits_{case}"))?;
        let got = model
            .forward(std::slice::from_ref(&ids))
            .into_data()
            .try_into_vec_as::<f32>()
            .expect("f32 logits");
        if got.len() != want.len() {
            bail!(
                "{name}/{case}: {} logits, the reference has {}",
                got.len(),
                want.len()
            );
        }
        for (a, b) in got.iter().zip(&want) {
            let d = (a - b).abs() as f64;
            worst = if d.is_nan() {
                f64::INFINITY
            } else {
                worst.max(d)
            };
        }
        let want_tokens = r.ids(&format!("greedy_{case}"))?[..4].to_vec();
        same &= generate(&model, &[ids], &greedy(4))?.tokens[0] == want_tokens;
    }
    Ok((worst, same))
}

/// Rows of a padded batch whose tokens differ from their one-by-one generation.
fn batching_check(fixtures: &Path, device: &Device) -> Result<usize> {
    let (model, _) = load(fixtures, "tiny-f32", device)?;
    let r = reference(fixtures, "tiny-f32")?;
    let long = r.ids("input_ids_long_text")?;
    let prompts = vec![
        long[..7].to_vec(),
        r.ids("input_ids_short_fixed")?,
        long[10..13].to_vec(),
    ];
    let batched = generate(&model, &prompts, &greedy(4))?;
    let mut differ = 0;
    for (i, p) in prompts.iter().enumerate() {
        let single = generate(&model, std::slice::from_ref(p), &greedy(4))?;
        differ += usize::from(batched.tokens[i] != single.tokens[0]);
    }
    Ok(differ)
}

/// What a training check starts from on `device` (autodiff): the tiny checkpoint, rank-4
/// adapters drawn on the host (the same numbers on every device, dropout off), four facts'
/// examples and the pad id.
fn training_inputs(
    fixtures: &Path,
    device: &Device,
) -> Result<(Llama, PeftAdapter, Vec<TrainExample>, u32)> {
    let facts = read_facts(&fixtures.join("facts/synthetic-20.jsonl"))?;
    let (model, tok) = load(fixtures, "tiny-f32", &device.clone().autodiff())?;
    let examples = build_examples(&tok, &facts[..4], model.config.max_position_embeddings)?;
    let pad = tok.pad_id().context("the tiny tokenizer has a pad id")?;
    let adapter = host_adapter(&model, &LoraConfig::new(4).with_init_seed(7), 11);
    Ok((model, adapter, examples, pad))
}

/// One LoRA step on `device` against the CPU backend: how far apart they are, and the CPU's
/// loss.
fn lora_step_check(fixtures: &Path, device: &Device) -> Result<(ProbeDistance, f64)> {
    let run = |device: &Device| -> Result<engram_lora::StepProbe> {
        let (model, adapter, examples, pad) = training_inputs(fixtures, device)?;
        Ok(gradient_probe(model, &adapter, &examples, pad)?)
    };
    let cpu = run(&Device::flex())?;
    let here = run(device)?;
    Ok((probe_distance(&cpu, &here), cpu.loss))
}

/// Steps and learning rate of the AdamW check.
const UPDATE_STEPS: (usize, f64) = (3, 1e-3);
/// Tolerance of the AdamW check, in units of `lr × steps`: f32 rounding of the update — about
/// one ulp of a factor near 1 at these settings (an ulp of 1.0 is 1.2e-7, lr × steps 3e-3), as
/// fused multiply-adds give. On llvmpipe the factors are bit-identical to the CPU's; on an H200
/// they differed by 2.98e-5 of lr × steps (8.9e-8: one ulp), over the 1e-5 this once was.
const UPDATE_TOL: f64 = 1e-4;

/// Three AdamW steps on `device` against the CPU backend, from the same host-drawn adapter and
/// gradients: the largest factor difference, and how far the CPU's factors moved, both in units
/// of `lr × steps`.
fn update_check(fixtures: &Path, device: &Device) -> Result<(f64, f64)> {
    let run =
        |device: &Device, steps: usize| -> Result<std::collections::BTreeMap<String, Vec<f32>>> {
            let (model, adapter, _, _) = training_inputs(fixtures, device)?;
            Ok(update_probe(model, &adapter, (steps, UPDATE_STEPS.1), 13)?)
        };
    let start = run(&Device::flex(), 0)?;
    let cpu = run(&Device::flex(), UPDATE_STEPS.0)?;
    let here = run(device, UPDATE_STEPS.0)?;
    let scale = UPDATE_STEPS.1 * UPDATE_STEPS.0 as f64;
    Ok((
        update_distance(&cpu, &here, scale),
        update_distance(&start, &cpu, scale),
    ))
}

/// Steps the captured-step check compares.
const CAPTURED_STEPS: usize = 4;

/// A LoRA step on the tiny checkpoint (rank 4, dropout on) captured once and replayed
/// ([`engram_lora::CapturedStep`]) against the same step run eagerly from the same adapters:
/// whether a graph was recorded, and the largest difference between the two runs' losses.
fn captured_check(fixtures: &Path, device: &Device) -> Result<(bool, f64)> {
    let (_, _, examples, pad) = training_inputs(fixtures, device)?;
    let build = || -> Result<Llama> {
        let (model, _) = load(fixtures, "tiny-f32", &device.clone().autodiff())?;
        Ok(model.with_lora(&LoraConfig::new(4).with_init_seed(7))?)
    };
    let c = crate::captured::measure(
        build,
        (&examples, pad),
        &engram_lora::TrainConfig::default(),
        device,
        CAPTURED_STEPS,
    )?;
    Ok((c.hardware, c.max_loss_diff))
}

/// Relative tolerance of the half-precision kernels against the Burn ops (the unit tests' bf16
/// tolerance: the two round differently, a few bf16 ulps apart).
const HALF_KERNEL_TOL: f64 = 3e-2;

/// The half type `backend`'s kernels are checked in: bf16, f16 on wgpu (WGSL has no bf16).
fn half_dtype(backend: &str) -> DType {
    if engram_model::backend_kind(backend) == "wgpu" {
        DType::F16
    } else {
        DType::BF16
    }
}

/// RoPE and attention, then SwiGLU, through the kernels against the composed Burn ops on
/// `device`, in `dtype`: plain, and with joined projections whose products are in `dtype` or in
/// f32 ([`engram_model::selfcheck`]); the worse of the two.
///
/// A panic inside (a kernel the device cannot compile) is this check's error, so the other
/// checks' results are still reported.
fn half_kernels_check(
    device: &Device,
    dtype: DType,
) -> Result<engram_model::selfcheck::KernelDistance> {
    let device = device.clone().autodiff();
    device.seed(25);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let attention = engram_model::selfcheck::rope_attention_distance(&device, dtype);
        attention.max(engram_model::selfcheck::swiglu_distance(&device, dtype))
    }))
    .map_err(|panic| {
        let text = engram_model::device::panic_text(panic.as_ref());
        anyhow::anyhow!("{dtype:?} kernels failed: {text}")
    })
}

/// The device allocator's reserved bytes, or the process's peak RSS.
fn memory(device: &Device) -> (String, f64) {
    if let Some(u) = device.memory_pool_usage() {
        let b = u.bytes_reserved as f64;
        return (
            format!("{:.1} MB reserved by the device allocator", b / 1e6),
            b,
        );
    }
    match crate::child::own_peak_rss_mb() {
        Some(mb) => (format!("{mb:.0} MB peak RSS of this process"), mb * 1e6),
        None => ("not reported on this platform".into(), f64::NAN),
    }
}

/// Runs a check's work: its result, seconds, and the GPU kernels compiled and autotune
/// decisions made meanwhile.
fn timed<T>(f: impl FnOnce() -> Result<T>) -> (Result<T>, f64, (u64, u64)) {
    let (before, t0) = (engram_model::kernel_cache::activity(), Instant::now());
    let r = f();
    let seconds = t0.elapsed().as_secs_f64();
    let work = engram_model::kernel_cache::activity().since(&before);
    (r, seconds, (work.compiled, work.autotuned))
}

fn failed(name: &str, e: anyhow::Error, seconds: f64, compiled: (u64, u64)) -> Check {
    Check {
        name: name.into(),
        passed: false,
        figure: format!("error: {}", engram_io::error_text(e.as_ref())),
        value: f64::NAN,
        seconds,
        compiled,
    }
}

/// Says that a check starts (a first run on a GPU compiles its kernels for a while).
fn starting(out: Out, name: &str) {
    say!(out, "....  {name}");
}

/// Says how a check ended, as soon as it has, with the kernels it compiled where it did.
fn ended(out: Out, c: Check) -> Check {
    let compiled = match c.compiled {
        (0, 0) => String::new(),
        (k, 0) => format!(", {k} GPU kernels compiled"),
        (k, t) => format!(", {k} GPU kernels compiled, {t} autotune decisions"),
    };
    say!(
        out,
        "{}  {:<26} {}  ({:.1} s{compiled})",
        if c.passed { "PASS" } else { "FAIL" },
        c.name,
        c.figure,
        c.seconds
    );
    c
}

/// Runs every check on `a.backend`, handing each line to `out` as a check starts and ends; an
/// error names every check that failed.
pub fn selftest(a: &Selftest, out: Out) -> Result<()> {
    let t0 = Instant::now();
    let device = open_device(&a.backend)?;
    let name = device_label(&device, &a.backend);
    say!(
        out,
        "engram selftest on {} ({name}), fixtures {}",
        a.backend,
        a.fixtures.display()
    );
    let (logit_tol, step_tol) = tolerances(&a.backend);
    let mut checks = Vec::new();
    for fixture in ["tiny-f32", "tiny-bf16-tied"] {
        let label = format!("logits {fixture}");
        starting(out, &label);
        checks.push(ended(
            out,
            match timed(|| logits_check(&a.fixtures, fixture, &device)) {
                (Ok((worst, same)), s, k) => Check {
                    name: label,
                    passed: worst <= logit_tol && same,
                    figure: format!(
                        "max |Δlogit| {worst:.2e} (≤ {logit_tol:e}), greedy tokens {}",
                        if same { "identical" } else { "DIFFER" }
                    ),
                    value: worst,
                    seconds: s,
                    compiled: k,
                },
                (Err(e), s, k) => failed(&label, e, s, k),
            },
        ));
    }
    starting(out, "batched generation");
    checks.push(ended(
        out,
        match timed(|| batching_check(&a.fixtures, &device)) {
            (Ok(differ), s, k) => Check {
                name: "batched generation".into(),
                passed: differ == 0,
                figure: format!("{differ} of 3 padded rows differ from one-by-one generation"),
                value: differ as f64,
                seconds: s,
                compiled: k,
            },
            (Err(e), s, k) => failed("batched generation", e, s, k),
        },
    ));
    starting(out, "LoRA step vs CPU");
    checks.push(ended(out, match timed(|| lora_step_check(&a.fixtures, &device)) {
        (Ok((d, loss)), s, k) => Check {
            name: "LoRA step vs CPU".into(),
            passed: d.within_loss(loss, step_tol),
            figure: format!(
                "loss {loss:.5}, |Δloss| {:.2e}, max |Δgrad| {:.2e} = {:.2e} of max |grad| (≤ {step_tol:e})",
                d.loss, d.grad_max_abs, d.grad_relative
            ),
            value: d.grad_relative,
            seconds: s,
            compiled: k,
        },
        (Err(e), s, k) => failed("LoRA step vs CPU", e, s, k),
    }));
    starting(out, "AdamW steps vs CPU");
    checks.push(ended(out, match timed(|| update_check(&a.fixtures, &device)) {
        (Ok((d, moved)), s, k) => Check {
            name: "AdamW steps vs CPU".into(),
            // AdamW moves an element by about lr a step: a check of factors that did not move
            // would compare nothing.
            passed: d <= UPDATE_TOL && moved >= 0.5,
            figure: format!(
                "{} steps at lr {:e}: max |Δfactor| {d:.2e} of lr × steps (≤ {UPDATE_TOL:e}); the factors moved {moved:.2} of it",
                UPDATE_STEPS.0, UPDATE_STEPS.1
            ),
            value: d,
            seconds: s,
            compiled: k,
        },
        (Err(e), s, k) => failed("AdamW steps vs CPU", e, s, k),
    }));
    let dtype = half_dtype(&a.backend);
    let label = format!(
        "RoPE+attention+SwiGLU {}",
        format!("{dtype:?}").to_lowercase()
    );
    starting(out, &label);
    checks.push(ended(
        out,
        match timed(|| half_kernels_check(&device, dtype)) {
            (Ok(d), s, k) => Check {
                name: label,
                passed: f64::from(d.worst()) <= HALF_KERNEL_TOL,
                figure: format!(
                    "kernels vs Burn ops: forward {:.2e}, gradients {:.2e} of max (≤ {HALF_KERNEL_TOL:e})",
                    d.forward, d.gradients
                ),
                value: f64::from(d.worst()),
                seconds: s,
                compiled: k,
            },
            (Err(e), s, k) => failed(&label, e, s, k),
        },
    ));
    // A graph of the training step: its replays must take the eager steps bit for bit. The CPU
    // backend has no graphs, so nothing to check there.
    if !is_cpu(&device) {
        let label = "captured step vs eager";
        starting(out, label);
        checks.push(ended(
            out,
            match timed(|| captured_check(&a.fixtures, &device)) {
                (Ok((graph, diff)), s, k) => Check {
                    name: label.into(),
                    passed: graph && diff == 0.0,
                    figure: if graph {
                        format!(
                            "{CAPTURED_STEPS} replayed steps' losses vs the same steps run eagerly: max |Δloss| {diff:.2e} (= 0)"
                        )
                    } else {
                        "the capture did not take: no graph recorded".into()
                    },
                    value: diff,
                    seconds: s,
                    compiled: k,
                },
                (Err(e), s, k) => failed(label, e, s, k),
            },
        ));
    }
    let (mem_text, mem_bytes) = memory(&device);
    say!(out, "memory: {mem_text}");
    let bad: Vec<&str> = checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect();
    say!(
        out,
        "{} of {} checks passed in {:.0} s",
        checks.len() - bad.len(),
        checks.len(),
        t0.elapsed().as_secs_f64()
    );
    if let Some(path) = &a.json {
        let v = json!({
            "backend": a.backend,
            "device": name,
            "passed": bad.is_empty(),
            "seconds": t0.elapsed().as_secs_f64(),
            "checks": checks.iter().map(|c| json!({
                "name": c.name, "passed": c.passed, "figure": c.figure,
                "value": if c.value.is_finite() { json!(c.value) } else { json!(null) },
                "seconds": c.seconds,
                "kernels_compiled": c.compiled.0, "autotune_decisions": c.compiled.1,
            })).collect::<Vec<_>>(),
            "memory_bytes": if mem_bytes.is_finite() { json!(mem_bytes) } else { json!(null) },
            "kernels": engram_model::kernel_cache::state().map(|_| engram_model::kernel_cache::summary()),
        });
        engram_io::write_file(path, serde_json::to_string_pretty(&v)?.as_bytes())?;
    }
    if !bad.is_empty() {
        bail!("selftest failed on {}: {}", a.backend, bad.join(", "));
    }
    Ok(())
}
