//! LoRA training on the wgpu backend (on a machine without a GPU: Mesa's software Vulkan
//! device, llvmpipe) against the CPU backend: the same short memorization run on a small random
//! Llama (and on the tiny Qwen2 fixture, whose q/k/v biases ride in the joined product on wgpu)
//! reaches the same exact match on both, and the exported adapters have the same format.
//! Dropout is off so that both backends run the same arithmetic (their dropout masks differ).
//! The one-step loss/gradient comparison is `engram selftest`'s (tested in engram-cli).
#![cfg(feature = "wgpu")]

use std::time::Instant;

use burn::tensor::Device;
use engram_checkpoint::{Checkpoint, SafetensorsCheckpoint, TensorSource};
use engram_lora::{TrainConfig, Trainer};
use engram_model::{Llama, LoraConfig, WeightDType, open_device};
use engram_testkit::{StopAfter, assert_follows, facts, random_model, rephrased_hits, train_lock};
use engram_tokenizer::ChatTokenizer;

/// Trains on `device` and returns (hits on the training prompts, loss per epoch, adapter dir).
fn run(
    device: Device,
    dir: &std::path::Path,
    out: &std::path::Path,
) -> (usize, Vec<f64>, std::time::Duration) {
    let t0 = Instant::now();
    let ckpt = Checkpoint::open(dir.to_str().unwrap()).unwrap();
    let tok = ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &device.autodiff()).unwrap();
    let facts = facts(4);
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(8).with_dropout(0.0).with_init_seed(3),
        // One batch of all four facts per epoch (one shape: llvmpipe compiles each new one),
        // constant lr, the default clipping at 1.0.
        train: TrainConfig {
            epochs: 60,
            lr: 1e-2,
            batch_size: 4,
            warmup_epochs: 0.0,
            decay: false,
            checkpoints: false,
            ..TrainConfig::default()
        },
        base_model: "random".into(),
    };
    let done = trainer.run(model, &facts, out, false).unwrap();
    let hits = rephrased_hits(&done.model, &tok, &facts, 4, 8);
    let losses = done.record.epoch_losses();
    (hits, losses, t0.elapsed())
}

/// Tensor names, shapes and stored formats of an adapter file.
fn layout(dir: &std::path::Path) -> Vec<(String, Vec<usize>, String)> {
    let st = SafetensorsCheckpoint::open_files(
        dir.to_path_buf(),
        vec![dir.join(engram_lora::ADAPTER_WEIGHTS)],
    )
    .unwrap();
    let mut names = st.names();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let info = st.info(&n).unwrap();
            (n, info.shape, info.stored_as)
        })
        .collect()
}

#[test]
fn a_memorization_run_on_wgpu_matches_the_cpu_one() {
    let _g = train_lock();
    let model_dir = tempfile::tempdir().unwrap();
    random_model(model_dir.path(), 64, 2, 4, 2, 128, 9);
    wgpu_matches_cpu(model_dir.path());
}

/// The same on the tiny Qwen2 fixture: on wgpu its q, k and v are one product with their
/// biases side by side (`Attention::qkv`), on the CPU three products each adding its bias.
#[test]
fn a_qwen2_memorization_run_on_wgpu_matches_the_cpu_one() {
    let _g = train_lock();
    let dir = engram_testkit::fixture("tiny-qwen2");
    let ckpt = Checkpoint::open(dir.to_str().unwrap()).unwrap();
    let wgpu = open_device("wgpu").expect("a wgpu adapter (Mesa's llvmpipe without a GPU)");
    let model = Llama::load(&ckpt, WeightDType::F32, &wgpu.autodiff()).unwrap();
    let joined = model.layers[0].self_attn.qkv.as_ref();
    assert!(
        joined.is_some_and(|j| j.bias.is_some()),
        "q, k and v joined with their biases on wgpu"
    );
    wgpu_matches_cpu(&dir);
}

/// Trains the checkpoint in `model_dir` on the CPU and on wgpu: the same exact match, epoch
/// losses close, the same adapter format.
fn wgpu_matches_cpu(model_dir: &std::path::Path) {
    let (cpu_out, gpu_out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (cpu_hits, cpu_losses, cpu_t) = run(Device::flex(), model_dir, cpu_out.path());
    let wgpu = open_device("wgpu").expect("a wgpu adapter (Mesa's llvmpipe without a GPU)");
    let (gpu_hits, gpu_losses, gpu_t) = run(wgpu, model_dir, gpu_out.path());
    let rel = |n: usize| {
        cpu_losses
            .iter()
            .zip(&gpu_losses)
            .take(n)
            .map(|(a, b)| (a - b).abs() / a.abs().max(1e-3))
            .fold(0.0, f64::max)
    };
    let (early, all) = (rel(10), rel(usize::MAX));
    eprintln!(
        "cpu: {cpu_hits}/4 in {cpu_t:.1?}, losses {cpu_losses:.4?}\nwgpu: {gpu_hits}/4 in {gpu_t:.1?}, losses {gpu_losses:.4?}\nworst relative epoch-loss difference: {early:.2e} over the first 10 epochs, {all:.2e} over all 60"
    );
    assert!(gpu_losses.iter().all(|l| l.is_finite()), "{gpu_losses:?}");
    assert!(cpu_hits >= 3, "the CPU run memorizes ({cpu_hits}/4)");
    assert_eq!(gpu_hits, cpu_hits, "wgpu and CPU exact match");
    // Rounding differences (summation order) grow over sixty steps at a high learning rate;
    // the first steps agree closely (the one-step gradient check is `engram selftest`'s).
    assert!(
        early < 1e-4,
        "first 10 epoch losses differ by {early:e} (relative)"
    );
    assert!(all < 5e-2, "epoch losses differ by {all:e} (relative)");
    assert_eq!(layout(gpu_out.path()), layout(cpu_out.path()));
    let config =
        |d: &std::path::Path| std::fs::read_to_string(d.join(engram_lora::ADAPTER_CONFIG)).unwrap();
    assert_eq!(config(gpu_out.path()), config(cpu_out.path()));
    // The wgpu run's record carries its compile work (kernels compiled, autotune decisions,
    // the cache); the CPU run's has none.
    let record = |d: &std::path::Path| -> serde_json::Value {
        let text = std::fs::read_to_string(d.join(engram_lora::TRAIN_RECORD)).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    assert!(record(cpu_out.path()).get("kernels").is_none());
    let kernels = record(gpu_out.path())["kernels"].clone();
    assert!(
        kernels["kernels_compiled"].is_u64() && kernels["autotune_decisions"].is_u64(),
        "{kernels}"
    );
}

/// A run on wgpu stopped after epoch 2 and resumed from its checkpoint ends on the same adapter,
/// byte for byte, as the uninterrupted run: the optimizer's buckets ([`engram_lora::flat`]) are
/// saved factor by factor and gathered again on resume.
#[test]
fn a_resumed_run_on_wgpu_ends_on_the_same_adapter() {
    let _g = train_lock();
    let model_dir = tempfile::tempdir().unwrap();
    random_model(model_dir.path(), 64, 2, 4, 2, 128, 9);
    let ckpt = Checkpoint::open(model_dir.path().to_str().unwrap()).unwrap();
    let tok = ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    let device = open_device("wgpu").expect("a wgpu adapter (Mesa's llvmpipe without a GPU)");
    let model = || Llama::load(&ckpt, WeightDType::F32, &device.clone().autodiff()).unwrap();
    let facts = facts(4);
    let trainer = Trainer {
        tokenizer: &tok,
        // Dropout on: its masks come from the device RNG, seeded per step.
        lora: LoraConfig::new(4).with_init_seed(3),
        train: TrainConfig {
            epochs: 4,
            lr: 5e-3,
            batch_size: 2,
            keep_checkpoints: 4,
            ..TrainConfig::default()
        },
        base_model: "random".into(),
    };
    let bytes = |d: &std::path::Path| std::fs::read(d.join(engram_lora::ADAPTER_WEIGHTS)).unwrap();
    let full = tempfile::tempdir().unwrap();
    let uninterrupted = trainer.run(model(), &facts, full.path(), false).unwrap();
    let cut = tempfile::tempdir().unwrap();
    trainer.run(model(), &facts, cut.path(), false).unwrap();
    for e in [3, 4] {
        std::fs::remove_dir_all(cut.path().join(format!("checkpoints/epoch-{e:04}"))).unwrap();
    }
    std::fs::remove_file(cut.path().join(engram_lora::ADAPTER_WEIGHTS)).unwrap();
    let resumed = trainer.run(model(), &facts, cut.path(), true).unwrap();
    assert_eq!(resumed.record.resumed_after_epoch, Some(2));
    assert_eq!(
        resumed.record.epoch_losses(),
        uninterrupted.record.epoch_losses()
    );
    assert!(
        bytes(cut.path()) == bytes(full.path()),
        "the resumed adapter differs"
    );
}

/// A device that fails mid-run ends the run with an error naming the device, the epoch and the
/// steps, and a record saying `failed` — not a panic; so does generation on it. The failure is
/// real: with a 300,000-token vocabulary the weights fit llvmpipe's 128 MiB buffers (the
/// embedding is 73 MiB), but the logits of 120 rows (generation's prompts, or a step's label
/// tokens) are more than one buffer holds.
#[test]
fn a_device_that_fails_mid_run_ends_it_with_a_named_error_and_a_record() {
    let _g = train_lock();
    let (_, tok) = engram_testkit::tiny(false);
    let ckpt = engram_testkit::tiny_ckpt();
    let mut cfg = engram_model::LlamaConfig::from_hf_json(&ckpt.config, "tiny-f32").unwrap();
    cfg.vocab_size = 300_000;
    let device = open_device("wgpu").unwrap();
    let model = Llama::random(cfg.clone(), WeightDType::F32, &device, 0).unwrap();
    let prompts = vec![tok.encode_prompt("hello").unwrap(); 120];
    let generated = engram_model::generate(&model, &prompts, &Default::default());
    let Err(e @ engram_model::ModelError::DeviceFailed { .. }) = generated else {
        panic!("generation should fail on the device: {generated:?}")
    };
    let e = e.to_string();
    assert!(e.starts_with("the llvmpipe"), "{e}");
    assert!(
        e.contains("larger than this device allocates at all"),
        "{e}"
    );
    let model = Llama::random(cfg, WeightDType::F32, &device.autodiff(), 0).unwrap();
    // One step of all 20 facts: their answers' label tokens are the logits' rows.
    let facts = facts(20);
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(4),
        train: TrainConfig {
            epochs: 2,
            batch_size: 20,
            ..TrainConfig::default()
        },
        base_model: "random".into(),
    };
    let out = tempfile::tempdir().unwrap();
    let e = trainer
        .run(model, &facts, out.path(), false)
        .err()
        .expect("the run fails")
        .to_string();
    assert!(
        e.starts_with("the llvmpipe") && e.contains("device failed in epoch 1, step 1: "),
        "{e}"
    );
    assert!(e.contains("can't allocate buffer of size"), "{e}");
    assert!(
        e.contains("larger than this device allocates at all"),
        "{e}"
    );
    assert!(e.ends_with("no epoch was checkpointed yet"), "{e}");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("train_record.json")).unwrap())
            .unwrap();
    assert_eq!(rec["status"], "failed");
    assert_eq!(rec["error"].as_str(), Some(e.as_str()));
}

/// Trains `model_dir`'s checkpoint on `device` with `graph = true` and LoRA dropout `dropout`
/// (8 facts in batches of 2: 4 steps an epoch, so the first epoch's first three are the
/// capture's warm-up), stopping after `stop_after` steps when given; returns the record.
fn graph_run(
    device: &Device,
    model_dir: &std::path::Path,
    out: &std::path::Path,
    run: (f64, bool, Option<u64>),
) -> Result<engram_lora::TrainRecord, engram_lora::LoraError> {
    graph_run_of(device, model_dir, out, run, (8, 1))
}

/// [`graph_run`] on `n` facts, `grad_accum` micro-batches a step.
fn graph_run_of(
    device: &Device,
    model_dir: &std::path::Path,
    out: &std::path::Path,
    (dropout, resume, stop_after): (f64, bool, Option<u64>),
    (n, grad_accum): (usize, usize),
) -> Result<engram_lora::TrainRecord, engram_lora::LoraError> {
    let ckpt = Checkpoint::open(model_dir.to_str().unwrap()).unwrap();
    let tok = ChatTokenizer::from_files(&ckpt.tokenizer).unwrap();
    let model = Llama::load(&ckpt, WeightDType::F32, &device.clone().autodiff()).unwrap();
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(8).with_init_seed(3).with_dropout(dropout),
        train: TrainConfig {
            epochs: 6,
            lr: 5e-3,
            batch_size: 2,
            grad_accum,
            warmup_epochs: 1.0,
            graph: true,
            ..TrainConfig::default()
        },
        base_model: "random".into(),
    };
    let progress = StopAfter::new(stop_after.unwrap_or(u64::MAX));
    trainer
        .run_until(model, &facts(n), out, resume, &progress, progress.stop())
        .map(|done| done.record)
}

/// `graph = true` on wgpu: the step is captured (CubeCL's software graph on llvmpipe) and each
/// later step is written into its buffers and replayed. With dropout off the run follows the
/// CPU's run of the same fixed-shape step (which runs the step's code every time); with
/// dropout on (keyed masks, moving with the step counter on the device) a run stopped in its
/// second epoch and resumed — captured again, its warm-up steps taken by the step's code —
/// ends on the uninterrupted run's adapter bit for bit.
#[test]
fn a_graph_run_on_wgpu_replays_its_steps_and_resumes() {
    let _g = train_lock();
    let model_dir = tempfile::tempdir().unwrap();
    random_model(model_dir.path(), 64, 2, 4, 2, 128, 9);
    let wgpu = open_device("wgpu").expect("a wgpu adapter (Mesa's llvmpipe without a GPU)");
    let dir = || tempfile::tempdir().unwrap();
    let (cpu_out, gpu_out, full, cut) = (dir(), dir(), dir(), dir());
    let cpu = graph_run(
        &Device::flex(),
        model_dir.path(),
        cpu_out.path(),
        (0.0, false, None),
    );
    let cpu = cpu.unwrap();
    let t0 = Instant::now();
    let gpu = graph_run(&wgpu, model_dir.path(), gpu_out.path(), (0.0, false, None)).unwrap();
    let gpu_t = t0.elapsed();
    let (c, g) = (cpu.epoch_losses(), gpu.epoch_losses());
    let graph = gpu
        .step_graph
        .as_ref()
        .expect("the record names the step graph");
    eprintln!(
        "cpu {c:.5?}\nwgpu {g:.5?} in {gpu_t:.1?} (capture {:.1} s)",
        graph.capture_seconds
    );
    assert!(graph.hardware, "wgpu records the step");
    assert!(!cpu.step_graph.as_ref().unwrap().hardware);
    assert_follows(&c, &g, 1e-3, ("cpu", "wgpu"));
    assert!(g.windows(2).all(|w| w[1] < w[0]), "the loss falls: {g:?}");

    let uninterrupted = graph_run(&wgpu, model_dir.path(), full.path(), (0.05, false, None));
    let uninterrupted = uninterrupted.unwrap();
    // Stopped after step 6 (the capture's three count at once), in epoch 2.
    let e = graph_run(&wgpu, model_dir.path(), cut.path(), (0.05, false, Some(6))).unwrap_err();
    assert!(
        matches!(
            e,
            engram_lora::LoraError::Stopped {
                epoch: 2,
                saved: 1,
                ..
            }
        ),
        "{e}"
    );
    let resumed = graph_run(&wgpu, model_dir.path(), cut.path(), (0.05, true, None)).unwrap();
    assert_eq!(resumed.resumed_after_epoch, Some(1));
    // Not bit for bit here (the CPU's test is): each process records the kernels its own
    // warm-up ran, and another capture may round an element an ulp apart (seen here: the
    // epochs right after the resume equal, epoch 4's mean loss 1.2e-9 apart, about one ulp
    // of one step's loss).
    let (r, u) = (resumed.epoch_losses(), uninterrupted.epoch_losses());
    assert_eq!(
        r[..3],
        u[..3],
        "the epochs up to and right after the resume"
    );
    assert_follows(&r, &u, 1e-6, ("resumed", "uninterrupted"));
    assert_ne!(u, g, "dropout changes the run");
}

/// `graph = true` on wgpu with two micro-batches a step: 13 facts in batches of 2 make 4 steps
/// an epoch, the last one a micro-batch of one row and a micro-batch of padding. The captured
/// step accumulates both micro-batches (recorded as a graph) and follows the CPU's run of the
/// same fixed-shape step, which runs its code every time.
#[test]
fn a_graph_run_on_wgpu_accumulates_micro_batches() {
    let _g = train_lock();
    let model_dir = tempfile::tempdir().unwrap();
    random_model(model_dir.path(), 64, 2, 4, 2, 128, 9);
    let wgpu = open_device("wgpu").expect("a wgpu adapter (Mesa's llvmpipe without a GPU)");
    let (cpu_out, gpu_out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = (0.0, false, None);
    let cpu = graph_run_of(
        &Device::flex(),
        model_dir.path(),
        cpu_out.path(),
        run,
        (13, 2),
    );
    let gpu = graph_run_of(&wgpu, model_dir.path(), gpu_out.path(), run, (13, 2));
    let (cpu, gpu) = (cpu.unwrap(), gpu.unwrap());
    let graph = gpu
        .step_graph
        .as_ref()
        .expect("the record names the step graph");
    assert!(graph.hardware, "wgpu records the step");
    assert_eq!((graph.shape.micro, graph.shape.rows), (2, 2), "{graph:?}");
    assert_eq!(
        gpu.epochs.iter().map(|e| e.steps).collect::<Vec<_>>(),
        vec![4; 6]
    );
    let (c, g) = (cpu.epoch_losses(), gpu.epoch_losses());
    eprintln!("cpu {c:.5?}\nwgpu {g:.5?}");
    assert_follows(&c, &g, 1e-3, ("cpu", "wgpu"));
    assert!(g.windows(2).all(|w| w[1] < w[0]), "the loss falls: {g:?}");
}
