//! Packed batches (`layout = "packed"`) compute what padded batches compute: the same loss and
//! the same adapter gradients for one micro-batch, and (dropout off) the same training run.

use engram_lora::BatchLayout;
use engram_lora::{Batch, batch_loss};
use engram_lora::{TrainConfig, TrainExample, Trainer, build_examples};
use engram_model::burn::optim::GradientsParams;
use engram_model::burn::tensor::Tensor;
use engram_model::{Llama, LoraConfig};
use engram_testkit::{fixtures, random_adapters, small_random, train_lock};

fn facts() -> Vec<engram_facts::Fact> {
    engram_facts::read_facts(&fixtures().join("facts/synthetic-20.jsonl")).unwrap()
}

/// The model with rank-4 adapters, `B` random too, dropout off.
fn adapted(model: Llama) -> Llama {
    random_adapters(model, 4, 11)
}

/// The loss and every adapter gradient (`A` then `B`, by layer and target) of one batch.
fn loss_and_grads(model: &Llama, batch: &Batch) -> (f32, Vec<Vec<f32>>) {
    let loss = batch_loss(model, batch, batch.labels() as f64);
    let value = scalar(loss.clone());
    let grads = GradientsParams::from_grads(loss.backward(), model);
    let host = |t: Tensor<2>| t.into_data().try_into_vec_as::<f32>().unwrap();
    let mut out = Vec::new();
    for (_, _, a) in model.adapters() {
        for id in [a.lora_a.id, a.lora_b.id] {
            out.push(host(
                grads.get::<2>(id).expect("every adapter has a gradient"),
            ));
        }
    }
    (value, out)
}

/// The value of a 1-element tensor.
fn scalar(t: Tensor<1>) -> f32 {
    t.into_data().try_into_vec_as::<f32>().unwrap()[0]
}

#[test]
fn a_packed_batch_has_the_padded_batchs_loss_and_gradients() {
    let _g = train_lock();
    let (model, tok, _dir) = small_random(2);
    let model = adapted(model);
    let examples: Vec<TrainExample> = build_examples(&tok, &facts(), 4096).unwrap();
    let batch: Vec<&TrainExample> = examples.iter().take(7).collect();
    let longest = batch.iter().map(|e| e.ids.len()).max().unwrap();
    let padded = Batch::new(&batch, 0, None);
    let (loss, grads) = loss_and_grads(&model, &padded);
    assert!(grads.iter().flatten().any(|&g| g != 0.0));
    // The default row length (the tiny tokenizer's examples are long: one per row there), and
    // rows of twice the longest example, which hold at least two each.
    for (len, packs) in [(longest.div_ceil(64) * 64, false), (2 * longest, true)] {
        let packed = Batch::new(&batch, 0, Some(len));
        assert!(
            !packs || packed.ids.len() <= 4,
            "{len}: {} rows",
            packed.ids.len()
        );
        assert!(
            packed.predict_at != padded.predict_at,
            "{len}: the slots are the same"
        );
        assert_eq!(packed.labels(), padded.labels());
        let (p_loss, p_grads) = loss_and_grads(&model, &packed);
        assert!(
            (p_loss - loss).abs() <= 1e-5 * loss.abs(),
            "row length {len}: loss {p_loss} vs padded {loss}"
        );
        for (i, (p, g)) in p_grads.iter().zip(&grads).enumerate() {
            let scale = g.iter().fold(0f32, |m, v| m.max(v.abs()));
            let diff = engram_testkit::max_abs_diff(p, g);
            assert!(
                diff <= 1e-4 * scale,
                "row length {len}, gradient {i}: max diff {diff} at scale {scale}"
            );
        }
    }
    // The packed layout also runs without autodiff (validation copies).
    let valid = model.for_inference();
    let plain = batch_loss(&valid, &Batch::new(&batch, 0, Some(2 * longest)), 1.0);
    let plain = scalar(plain) / padded.labels() as f32;
    assert!(
        (plain - loss).abs() <= 1e-5 * loss.abs(),
        "{plain} vs {loss}"
    );
}

#[test]
fn a_packed_run_follows_the_padded_run_and_a_short_row_is_named() {
    let _g = train_lock();
    let facts = facts();
    let run = |layout: BatchLayout, pack_length: Option<usize>| {
        let (model, tok, _dir) = small_random(4);
        let trainer = Trainer {
            tokenizer: &tok,
            lora: LoraConfig::new(8).with_dropout(0.0).with_init_seed(1),
            train: TrainConfig {
                epochs: 4,
                lr: 2e-3,
                batch_size: 8,
                warmup_epochs: 0.0,
                layout,
                pack_length,
                checkpoints: false,
                ..TrainConfig::default()
            },
            base_model: "small-random".into(),
        };
        let out = tempfile::tempdir().unwrap();
        trainer
            .run(model, &facts, out.path(), false)
            .map(|done| done.record.epoch_losses())
            .map_err(|e| e.to_string())
    };
    let padded = run(BatchLayout::Padded, None).unwrap();
    let packed = run(BatchLayout::Packed, None).unwrap();
    eprintln!("padded {padded:.5?}\npacked {packed:.5?}");
    assert!(padded[3] < 0.8 * padded[0], "the loss falls: {padded:?}");
    for (e, (p, q)) in packed.iter().zip(&padded).enumerate() {
        assert!((p - q).abs() <= 2e-3 * q, "epoch {}: {p} vs {q}", e + 1);
    }
    let e = run(BatchLayout::Packed, Some(8)).unwrap_err();
    assert!(
        e.contains("pack_length = 8") && e.contains("longest"),
        "{e}"
    );
    let e = run(BatchLayout::Padded, Some(128)).unwrap_err();
    assert!(e.contains("pack_length") && e.contains("packed"), "{e}");
}
