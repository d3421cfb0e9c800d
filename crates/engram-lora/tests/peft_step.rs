//! engram's training step against PEFT's (`tests/fixtures/lora/train-steps.safetensors`, made by
//! `tests/peers/make_train_step_fixture.py`): on the tiny model with PEFT's r4 adapter and
//! dropout off, the loss and every adapter gradient of a padded batch, then the loss, the
//! global gradient norm and the factors over three clipped AdamW steps (weight decay on) equal
//! transformers + PEFT + torch's within float tolerance — in one micro-batch and split into
//! two accumulated ones. The same on the Qwen2 (q/k/v biases) and Qwen3 (per-head q/k norms)
//! tiny models with PEFT's adapters on them (`lora-qwen2/`, `lora-qwen3/`).

use burn::tensor::{Device, Tensor};
use engram_lora::TrainExample;
use engram_lora::{TrainConfig, load_adapter};
use engram_lora::{gradients, optimizer};
use engram_model::Llama;
use engram_testkit::{Reference, fixtures, max_abs_diff, train_lock};

/// What the fixture was made with (its `settings` metadata, checked below).
const LR: f64 = 1e-3;
const STEPS: usize = 3;

/// A base fixture and the directory of PEFT's adapter and steps on it.
#[derive(Clone, Copy)]
struct Case {
    base: &'static str,
    lora: &'static str,
    /// Factor entries whose first-step gradient is below this share of the factor's largest
    /// gradient are float noise in both frameworks, and AdamW's normalization turns noise into
    /// updates of about the learning rate: those entries are held to `STEPS × LR` after the
    /// steps, the rest to the usual 1e-4 of scale. (On tiny-qwen2 one entry of 2,048, with a
    /// first-step gradient 4e-7 of its factor's largest, ends 1.25e-4 from PEFT's; every other
    /// entry within 1e-5.) `None`: every entry at 1e-4 of scale.
    noise_floor: Option<f32>,
}

const LLAMA: Case = Case {
    base: "tiny-f32",
    lora: "lora",
    noise_floor: None,
};

fn reference(c: Case) -> Reference {
    Reference::open(&fixtures().join(c.lora).join("train-steps.safetensors"))
}

/// The base model (autodiff) with PEFT's r4 adapter, dropout off.
fn model(c: Case) -> Llama {
    let mut adapter = load_adapter(&fixtures().join(c.lora).join("r4")).unwrap();
    adapter.config.dropout = 0.0;
    let base = engram_testkit::load_on(c.base, &Device::flex().autodiff());
    adapter.apply(base).unwrap()
}

/// The fixture's three examples.
fn examples(r: &Reference) -> Vec<TrainExample> {
    (0..3)
        .map(|i| TrainExample {
            id: format!("example-{i}"),
            ids: r.ids(&format!("ids_{i}")),
            prompt_len: r.ids(&format!("prompt_len_{i}"))[0] as usize,
        })
        .collect()
}

fn host(t: Tensor<2>) -> Vec<f32> {
    t.transpose().into_data().try_into_vec_as::<f32>().unwrap()
}

/// The largest magnitude.
fn largest(v: &[f32]) -> f32 {
    v.iter().fold(0f32, |m, x| m.max(x.abs()))
}

/// `got` against `want` relative to `want`'s largest magnitude.
fn close(what: &str, got: &[f32], want: &[f32], tolerance: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = largest(want);
    let d = max_abs_diff(got, want);
    assert!(
        d <= tolerance * scale,
        "{what}: max |Δ| {d:.3e} at scale {scale:.3e}"
    );
}

/// Three steps over `group` (the examples' indices, one micro-batch each) against PEFT's.
fn three_steps_follow_peft(c: Case, group: &[Vec<usize>]) {
    let r = reference(c);
    let settings = r.metadata("settings").expect("settings metadata");
    let settings: serde_json::Value = serde_json::from_str(&settings).unwrap();
    assert_eq!(settings["lr"].as_f64(), Some(LR));
    assert_eq!(settings["steps"].as_u64(), Some(STEPS as u64));
    let cfg = TrainConfig {
        weight_decay: settings["weight_decay"].as_f64().unwrap(),
        max_grad_norm: settings["max_grad_norm"].as_f64(),
        ..TrainConfig::default()
    };
    let examples = examples(&r);
    let want_loss = r.f32("loss");
    let want_norm = r.f32("norm");
    let mut model = model(c);
    let mut optim = optimizer(&cfg);
    for step in 0..STEPS {
        let g = gradients(&model, &examples, group, (0, None), step, &cfg);
        let loss = g.loss.clone().into_data().try_into_vec::<f32>().unwrap()[0];
        assert!(
            (loss - want_loss[step]).abs() <= 1e-5 * want_loss[step].abs(),
            "step {step}: loss {loss} vs PEFT {}",
            want_loss[step]
        );
        let mut squares = 0f64;
        for (name, p) in model.adapter_factors() {
            let grad = g.grads.grads.factor(p.id).expect("a gradient");
            let grad = host(grad);
            squares += grad.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>();
            if step == 0 {
                close(
                    &format!("gradient of {name}"),
                    &grad,
                    &r.f32(&format!("grad.{name}")),
                    1e-4,
                );
            }
        }
        let norm = squares.sqrt() as f32;
        eprintln!(
            "step {step}: loss {loss} (PEFT {}), gradient norm {norm} (PEFT {})",
            want_loss[step], want_norm[step]
        );
        assert!(
            (norm - want_norm[step]).abs() <= 1e-4 * want_norm[step],
            "step {step}: gradient norm {norm} vs PEFT {}",
            want_norm[step]
        );
        model = optim.step(LR, model, g.grads);
    }
    for (name, p) in model.adapter_factors() {
        let (got, want) = (host(p.val()), r.f32(&format!("after.{name}")));
        let what = format!("{name} after {STEPS} steps");
        let Some(floor) = c.noise_floor else {
            close(&what, &got, &want, 1e-4);
            continue;
        };
        let g0 = r.f32(&format!("grad.{name}"));
        let (gs, scale) = (largest(&g0), largest(&want));
        for (i, ((a, b), g)) in got.iter().zip(&want).zip(&g0).enumerate() {
            let tol = if g.abs() < floor * gs {
                (STEPS as f64 * LR) as f32
            } else {
                1e-4 * scale
            };
            assert!(
                (a - b).abs() <= tol,
                "{what}[{i}]: {a} vs PEFT {b} (first gradient {g:.3e} of {gs:.3e})"
            );
        }
    }
}

#[test]
fn a_padded_batch_trains_as_peft_does() {
    let _g = train_lock();
    three_steps_follow_peft(LLAMA, &[vec![0, 1, 2]]);
}

#[test]
fn accumulated_micro_batches_train_as_one_peft_batch() {
    let _g = train_lock();
    three_steps_follow_peft(LLAMA, &[vec![0, 1], vec![2]]);
}

#[test]
fn qwen2_trains_as_peft_does() {
    let _g = train_lock();
    let qwen2 = Case {
        base: "tiny-qwen2",
        lora: "lora-qwen2",
        noise_floor: Some(1e-5),
    };
    three_steps_follow_peft(qwen2, &[vec![0, 1, 2]]);
}

#[test]
fn qwen3_trains_as_peft_does() {
    let _g = train_lock();
    let qwen3 = Case {
        base: "tiny-qwen3",
        lora: "lora-qwen3",
        noise_floor: Some(1e-5),
    };
    three_steps_follow_peft(qwen3, &[vec![0, 1], vec![2]]);
}
