//! `adapter_compute = "bf16"`: the adapters' matmuls really run in bf16 (the output moves by a
//! bf16 rounding, no more), the factors and their optimizer state stay f32, and the memorization
//! run still memorizes — its exact match and final loss printed beside the f32 run's.

use engram_lora::{AdapterCompute, TrainConfig, Trainer};
use engram_model::burn::tensor::{DType, Distribution, Tensor};
use engram_model::{LoraAdapter, LoraConfig};
use engram_testkit::{fixtures, max_abs_diff, rephrased_hits, small_random, train_lock};

#[test]
fn a_bf16_adapter_rounds_its_product_and_keeps_f32_factors() {
    let device = engram_model::burn::tensor::Device::flex();
    device.seed(5);
    let normal = |shape: [usize; 2], std: f64| {
        Tensor::<2>::random(shape, Distribution::Normal(0.0, std), &device)
    };
    let mut ad = LoraAdapter::from_factors(
        "model.layers.0.mlp.up_proj",
        normal([64, 8], 0.1),
        normal([8, 32], 0.1),
        2.0,
        0.0,
    );
    let x = normal([16, 64], 1.0);
    let host = |t: Tensor<2>| t.into_data().try_into_vec_as::<f32>().unwrap();
    let exact = host(ad.delta(x.clone()));
    ad.compute = DType::BF16;
    let y = ad.delta(x.clone());
    assert_eq!(
        y.dtype(),
        DType::F32,
        "the delta comes back in the input's dtype"
    );
    let rounded = host(y);
    let scale = exact.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = max_abs_diff(&rounded, &exact);
    // bf16 keeps 8 significant bits: three roundings (input, factors, product) of ~0.4 % each.
    assert!(diff > 0.0, "bf16 compute changed nothing");
    assert!(diff < 0.03 * scale, "diff {diff} at scale {scale}");
    assert_eq!(ad.lora_a.val().dtype(), DType::F32);
    assert_eq!(ad.lora_b.val().dtype(), DType::F32);
}

#[test]
fn bf16_adapter_compute_memorizes_beside_f32() {
    let _g = train_lock();
    let facts = engram_facts::read_facts(&fixtures().join("facts/synthetic-20.jsonl")).unwrap();
    let run = |compute: AdapterCompute| {
        let (model, tok, _dir) = small_random(5);
        let trainer = Trainer {
            tokenizer: &tok,
            lora: LoraConfig::new(16).with_init_seed(1),
            // The memorization test's settings (tests/training.rs).
            train: TrainConfig {
                epochs: 50,
                lr: 2e-3,
                batch_size: 4,
                warmup_epochs: 0.0,
                max_grad_norm: None,
                checkpoints: false,
                adapter_compute: compute,
                ..TrainConfig::default()
            },
            base_model: "small-random".into(),
        };
        let out = tempfile::tempdir().unwrap();
        let done = trainer.run(model, &facts, out.path(), false).unwrap();
        for (_, _, a) in done.model.adapters() {
            assert_eq!(a.compute, compute.dtype());
            assert_eq!(a.lora_a.val().dtype(), DType::F32);
        }
        let hits = rephrased_hits(&done.model, &tok, &facts, 8, 16);
        let losses = done.record.epoch_losses();
        (hits, losses)
    };
    let (f32_hits, f32_loss) = run(AdapterCompute::F32);
    let (bf16_hits, bf16_loss) = run(AdapterCompute::Bf16);
    let last = |l: &[f64]| l[l.len() - 1];
    eprintln!(
        "adapter compute f32: {f32_hits}/20 exact, final loss {:.4}; bf16: {bf16_hits}/20 exact, final loss {:.4}",
        last(&f32_loss),
        last(&bf16_loss)
    );
    assert!(f32_hits >= 19, "f32 {f32_hits}/20");
    assert!(bf16_hits >= 18, "bf16 {bf16_hits}/20");
    assert!(last(&bf16_loss) < 0.1 * bf16_loss[0], "{bf16_loss:?}");
    assert!(bf16_loss != f32_loss, "bf16 compute trained exactly as f32");
}
