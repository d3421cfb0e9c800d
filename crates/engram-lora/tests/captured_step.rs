//! A training step captured once and replayed ([`engram_lora::CapturedStep`]): on wgpu
//! (llvmpipe in CI), where CubeCL records a software graph, the replays take exactly the steps
//! the same code takes run eagerly — the same losses and adapters, bit for bit, dropout on — so
//! the state a step carries (adapters, moments, step counter, dropout key) really moves from
//! one replay to the next; with dropout off that code follows the trainer's step (AdamW's bias
//! corrections on the device are the only difference); and where there are no graphs (the CPU
//! backend) replays run the step's code and still train.

use burn::tensor::{Device, Tensor};
use engram_lora::{
    Batch, BatchInputs, CapturedStep, TrainConfig, TrainExample, gradients, optimizer,
};
use engram_model::{Llama, LlamaConfig, LoraConfig, WeightDType};
use engram_testkit::train_lock;

/// The tiny f32 fixture's architecture (2 layers, hidden 64).
fn tiny() -> LlamaConfig {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/tiny-f32/config.json"
    );
    let v = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    LlamaConfig::from_hf_json(&v, path).unwrap()
}

/// Four examples of 24 tokens, the last 8 labels.
fn examples() -> Vec<TrainExample> {
    (0..4)
        .map(|i| TrainExample {
            id: format!("{i}"),
            ids: (0..24)
                .map(|k| ((k * 37 + i * 101) % 2000) as u32)
                .collect(),
            prompt_len: 16,
        })
        .collect()
}

/// A random rank-8 model on `device`'s training device (the same weights every time).
fn model(device: &Device, dropout: f64) -> Llama {
    Llama::random(tiny(), WeightDType::F32, &device.clone().autodiff(), 0)
        .unwrap()
        .with_lora(&LoraConfig::new(8).with_dropout(dropout))
        .unwrap()
}

fn config() -> TrainConfig {
    TrainConfig {
        weight_decay: 0.01,
        ..TrainConfig::default()
    }
}

const LR: f64 = 1e-3;

/// The step over all four examples of a fresh model, captured (`graph`) or not.
fn captured(device: &Device, dropout: f64, lr: f64, graph: bool) -> CapturedStep {
    let model = model(device, dropout);
    let ex = examples();
    let refs: Vec<&TrainExample> = ex.iter().collect();
    let batch = Batch::new(&refs, 0, None);
    let inputs = vec![BatchInputs::upload(&model, &batch)];
    let cfg = config();
    CapturedStep::new(
        model,
        optimizer(&cfg),
        inputs,
        batch.labels(),
        &cfg,
        lr,
        graph,
    )
}

/// The captured (`graph`) or eager step's losses over `steps` steps after the first three, and
/// the model and optimizer afterwards.
fn run(
    device: &Device,
    dropout: f64,
    graph: bool,
    steps: usize,
) -> (Vec<f32>, bool, Llama, engram_lora::AdamW) {
    let mut step = captured(device, dropout, LR, graph);
    assert_eq!(step.steps(), 3, "three steps taken before the replays");
    let losses: Vec<Tensor<1>> = (0..steps).map(|_| step.replay()).collect();
    assert_eq!(step.steps(), 3 + steps as u64);
    let losses = Tensor::cat(losses, 0)
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap();
    let hardware = step.is_hardware();
    let (model, optim) = step.finish();
    (losses, hardware, model, optim)
}

/// Every adapter factor's values, in order.
fn factors(model: &Llama) -> Vec<f32> {
    model
        .adapter_factors()
        .into_iter()
        .flat_map(|(_, p)| p.val().into_data().try_into_vec_as::<f32>().unwrap())
        .collect()
}

#[cfg(feature = "wgpu")]
#[test]
fn on_wgpu_replays_take_the_eager_steps_bit_for_bit() {
    let _g = train_lock();
    let device = engram_model::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
    let (eager, hw, eager_model, eager_optim) = run(&device, 0.05, false, 6);
    assert!(!hw);
    let (replayed, hw, replayed_model, replayed_optim) = run(&device, 0.05, true, 6);
    assert!(hw, "wgpu records a software graph");
    assert_eq!(replayed, eager, "losses, step by step");
    assert!(eager[5] < eager[0], "the loss falls: {eager:?}");
    assert_eq!(
        factors(&replayed_model),
        factors(&eager_model),
        "the adapters"
    );
    assert_eq!((replayed_optim.steps(), eager_optim.steps()), (9, 9));
    // The masks count: without dropout the same run takes other steps. (The eager run keys each
    // step's masks anew, so the equality above also shows that the graph's key moves.)
    let (no_dropout, _, _, _) = run(&device, 0.0, true, 6);
    assert_ne!(no_dropout, replayed);
}

/// With dropout off the captured step's code (run eagerly) follows the trainer's step: only
/// AdamW's bias corrections differ (f32 on the device, f64 on the host).
#[cfg(feature = "wgpu")]
#[test]
fn on_wgpu_the_capturable_step_follows_the_trainers() {
    let _g = train_lock();
    let device = engram_model::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
    let (captured, _, captured_model, _) = run(&device, 0.0, false, 6);
    let cfg = config();
    let mut model = model(&device, 0.0);
    let mut optim = optimizer(&cfg);
    let ex = examples();
    let group = vec![(0..ex.len()).collect::<Vec<_>>()];
    let mut losses = Vec::new();
    for step in 0..9 {
        let g = gradients(&model, &ex, &group, (0, None), step, &cfg);
        losses.push(g.loss.into_data().try_into_vec_as::<f32>().unwrap()[0]);
        model = optim.step(LR, model, g.grads);
    }
    for (a, b) in captured.iter().zip(&losses[3..]) {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs(),
            "{captured:?} vs {:?}",
            &losses[3..]
        );
    }
    let (a, b) = (factors(&captured_model), factors(&model));
    let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
    let diff = a
        .iter()
        .zip(&b)
        .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(diff <= 1e-4 * scale, "adapters differ by {diff} of {scale}");
}

/// The CPU backend has no graphs: the capture runs the step four times and each replay runs it
/// again; the loss still falls and the steps are counted.
#[test]
fn on_the_cpu_replays_run_the_step() {
    let _g = train_lock();
    let mut step = captured(&Device::flex(), 0.05, 1e-2, true);
    assert!(!step.is_hardware());
    assert_eq!(step.steps(), 4);
    let first = step.replay().into_data().try_into_vec_as::<f32>().unwrap()[0];
    let mut last = first;
    for _ in 0..5 {
        last = step.replay().into_data().try_into_vec_as::<f32>().unwrap()[0];
    }
    assert!(last < first, "{last} after {first}");
    let (_, optim) = step.finish();
    assert_eq!(optim.steps(), 10);
}
