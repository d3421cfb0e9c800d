//! The trainer really memorizes, leaves the base untouched, keeps optimizer state for the
//! adapters only, resumes exactly, and names bad input.

use engram_lora::{TrainConfig, Trainer, load_adapter};
use engram_model::{AnswerConfig, LoraConfig, LoraTarget, answer_questions};
use engram_testkit::{
    StopAfter, assert_follows, base_weights, facts, small_random, tiny, train_lock,
};

/// The answer, surrounding whitespace aside, is the gold answer, character for character.
fn verbatim(answer: &str, gold: &str) -> bool {
    answer.trim() == gold.trim()
}

fn quick(epochs: usize, lr: f64) -> TrainConfig {
    TrainConfig {
        epochs,
        lr,
        batch_size: 4,
        warmup_epochs: 1.0,
        // These runs were measured without clipping (the preset default clips at 1.0).
        max_grad_norm: None,
        ..TrainConfig::default()
    }
}

#[test]
fn memorizes_twenty_facts_and_leaves_the_base_untouched() {
    let _g = train_lock();
    let (model, tok, _dir) = small_random(5);
    let before = base_weights(&model);
    // 20 synthetic EnronQA-style facts made by ../shared/peers/make_facts.py (seed 0).
    let facts =
        engram_facts::read_facts(&engram_testkit::fixtures().join("facts/synthetic-20.jsonl"))
            .unwrap();
    let lora = LoraConfig::new(16).with_init_seed(1);
    let trainer = Trainer {
        tokenizer: &tok,
        lora: lora.clone(),
        // No warm-up (the budget is small), then the default linear decay: at a constant 2e-3
        // the loss of this tiny model can climb back from ~0.03 late in the run, depending on
        // the dropout masks drawn.
        train: TrainConfig {
            warmup_epochs: 0.0,
            ..quick(50, 2e-3)
        },
        base_model: "tiny-f32".into(),
    };
    let out = tempfile::tempdir().unwrap();
    let done = trainer.run(model, &facts, out.path(), false).unwrap();
    let losses = done.record.epoch_losses();
    eprintln!("epoch losses: {losses:.3?}");
    // The loss falls on average: each quarter of the run is below the one before it.
    let q = losses.len() / 4;
    let quarter = |k: usize| losses[k * q..(k + 1) * q].iter().sum::<f64>() / q as f64;
    for k in 1..4 {
        assert!(quarter(k) < quarter(k - 1), "quarter {k}: {losses:?}");
    }
    assert!(losses[losses.len() - 1] < 0.1 * losses[0], "{losses:?}");

    // ≥ 95 % exact match on the training (rephrased) prompts.
    let questions: Vec<String> = facts.iter().map(|f| f.rephrased_question.clone()).collect();
    let cfg = AnswerConfig {
        batch_size: 8,
        max_new_tokens: 16,
        stop_ids: tok.stop_ids(&done.model.config.eos_token_ids),
        ..Default::default()
    };
    let answers = answer_questions(&done.model, &tok, &questions, &cfg, None).unwrap();
    let hits = answers
        .iter()
        .zip(&facts)
        .filter(|(a, f)| verbatim(&a.text, &f.answer))
        .count();
    eprintln!("exact match on rephrased prompts: {hits}/20");
    for (a, f) in answers.iter().zip(&facts).take(3) {
        eprintln!(
            "  {:?} -> {:?} (gold {:?})",
            f.rephrased_question, a.text, f.answer
        );
    }
    assert!(hits >= 19, "{hits}/20");

    // The base weights are bit-identical; the optimizer holds state for the adapters only
    // (moments for each A and B, and nothing else).
    assert_eq!(base_weights(&done.model), before);
    let adapters = done.model.adapters().len();
    assert_eq!(adapters, 4 * 7);
    assert_eq!(done.optimizer.len(), 2 * adapters);
    for (_, _, a) in done.model.adapters() {
        for p in [&a.lora_a, &a.lora_b] {
            let m = done
                .optimizer
                .moments(p.id)
                .expect("state for every factor");
            assert_eq!(m.exp_avg.dims(), p.shape().dims::<2>());
            assert_eq!(m.exp_avg_sq.dims(), p.shape().dims::<2>());
        }
    }

    // The written adapter is what was trained.
    let saved = load_adapter(out.path()).unwrap();
    assert_eq!(saved.factors.len(), adapters);
    assert!(out.path().join("train_record.json").exists());
    assert!(done.record.status == "finished");
}

fn adapter_bytes(dir: &std::path::Path) -> Vec<u8> {
    std::fs::read(dir.join("adapter_model.safetensors")).unwrap()
}

#[test]
fn resume_ends_on_the_same_adapter_as_an_uninterrupted_run() {
    let _g = train_lock();
    let facts = facts(10);
    let (_, tok) = tiny(false);
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(4).with_targets(vec![LoraTarget::Q, LoraTarget::V, LoraTarget::Down]),
        train: TrainConfig {
            keep_checkpoints: 4,
            grad_accum: 2,
            max_grad_norm: Some(1.0),
            batch_size: 2,
            ..quick(4, 5e-3)
        },
        base_model: "tiny-f32".into(),
    };
    let full = tempfile::tempdir().unwrap();
    let (model, _) = tiny(true);
    let uninterrupted = trainer.run(model, &facts, full.path(), false).unwrap();

    // Same run, "killed" after epoch 2: later checkpoints and the final adapter are gone.
    let cut = tempfile::tempdir().unwrap();
    let (model, _) = tiny(true);
    let _ = trainer.run(model, &facts, cut.path(), false).unwrap();
    for e in [3, 4] {
        std::fs::remove_dir_all(cut.path().join(format!("checkpoints/epoch-{e:04}"))).unwrap();
    }
    std::fs::remove_file(cut.path().join("adapter_model.safetensors")).unwrap();

    // Without --resume the directory is refused (nothing is overwritten).
    let (model, _) = tiny(true);
    let e = trainer
        .run(model, &facts, cut.path(), false)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--resume"), "{e}");

    // Resumed with another loss-read interval: not an outcome setting, so the checkpoint is
    // this run's and the adapter comes out the same.
    let (model, _) = tiny(true);
    let resumed = Trainer {
        train: TrainConfig {
            log_every: 1,
            ..trainer.train.clone()
        },
        lora: trainer.lora.clone(),
        tokenizer: &tok,
        base_model: "tiny-f32".into(),
    }
    .run(model, &facts, cut.path(), true)
    .unwrap();
    assert_eq!(resumed.record.resumed_after_epoch, Some(2));
    assert_eq!(adapter_bytes(cut.path()), adapter_bytes(full.path()));
    assert_eq!(
        resumed.record.epoch_losses(),
        uninterrupted.record.epoch_losses()
    );

    // Changing a setting makes the checkpoint foreign.
    let other = Trainer {
        train: TrainConfig {
            lr: 1e-3,
            ..trainer.train.clone()
        },
        lora: trainer.lora.clone(),
        tokenizer: &tok,
        base_model: "tiny-f32".into(),
    };
    let (model, _) = tiny(true);
    let e = other
        .run(model, &facts, cut.path(), true)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("cannot resume"), "{e}");
}

#[test]
fn a_stop_ends_at_a_step_keeps_the_epoch_checkpoint_and_resumes_exactly() {
    let _g = train_lock();
    let facts = facts(10);
    let (_, tok) = tiny(false);
    // 10 facts in batches of 2, two per step: 3 steps an epoch.
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(4),
        train: TrainConfig {
            grad_accum: 2,
            batch_size: 2,
            ..quick(4, 5e-3)
        },
        base_model: "tiny-f32".into(),
    };
    let full = tempfile::tempdir().unwrap();
    let (model, _) = tiny(true);
    let uninterrupted = trainer.run(model, &facts, full.path(), false).unwrap();

    // Stopped after the first step of epoch 3: that step is dropped, epoch 2 is kept.
    let cut = tempfile::tempdir().unwrap();
    let (model, _) = tiny(true);
    let progress = StopAfter::new(7);
    let e = trainer
        .run_until(model, &facts, cut.path(), false, &progress, progress.stop())
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            engram_lora::LoraError::Stopped {
                signal: 10,
                epoch: 3,
                saved: 2
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("the newest checkpoint holds epoch 2"),
        "{e}"
    );
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cut.path().join("train_record.json")).unwrap())
            .unwrap();
    assert_eq!(rec["status"], "stopped");
    assert_eq!(rec["epochs"].as_array().unwrap().len(), 2);
    assert!(!cut.path().join("adapter_model.safetensors").exists());

    let (model, _) = tiny(true);
    let resumed = trainer.run(model, &facts, cut.path(), true).unwrap();
    assert_eq!(resumed.record.resumed_after_epoch, Some(2));
    assert_eq!(resumed.record.status, "finished");
    assert_eq!(adapter_bytes(cut.path()), adapter_bytes(full.path()));
    assert_eq!(
        resumed.record.epoch_losses(),
        uninterrupted.record.epoch_losses()
    );
}

#[test]
fn same_seed_same_adapter() {
    let _g = train_lock();
    let facts = facts(6);
    let (_, tok) = tiny(false);
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(4).with_targets(vec![LoraTarget::Q, LoraTarget::Up]),
        train: TrainConfig {
            checkpoints: false,
            ..quick(2, 1e-3)
        },
        base_model: "tiny-f32".into(),
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    trainer.run(tiny(true).0, &facts, a.path(), false).unwrap();
    trainer.run(tiny(true).0, &facts, b.path(), false).unwrap();
    assert_eq!(adapter_bytes(a.path()), adapter_bytes(b.path()));
}

#[test]
fn a_diverging_run_ends_with_a_named_error_and_a_record() {
    let _g = train_lock();
    let (model, tok) = tiny(true);
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(8),
        train: TrainConfig {
            warmup_epochs: 0.0,
            // Big enough that B·A overflows f32 on the second step.
            ..quick(5, 3e38)
        },
        base_model: "tiny-f32".into(),
    };
    let out = tempfile::tempdir().unwrap();
    let e = trainer
        .run(model, &facts(8), out.path(), false)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("diverged"), "{e}");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("train_record.json")).unwrap())
            .unwrap();
    assert_eq!(rec["status"], "diverged");
    assert!(rec["error"].as_str().unwrap().contains("loss"));
    // No checkpoint holds the diverged weights: only epochs before the diverged one are kept.
    let epoch: usize = e
        .split("at epoch ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    if let Ok(dir) = std::fs::read_dir(out.path().join("checkpoints")) {
        for c in dir {
            let name = c.unwrap().file_name().into_string().unwrap();
            let n: usize = name.trim_start_matches("epoch-").parse().unwrap();
            assert!(
                n < epoch,
                "{name} written after a divergence in epoch {epoch}"
            );
        }
    }

    // Losses read every step or once per epoch: the error names the same step (the one whose
    // loss first left the finite range, not the one that read it).
    for every in [1, 100] {
        let out = tempfile::tempdir().unwrap();
        let t = Trainer {
            train: TrainConfig {
                log_every: every,
                ..trainer.train.clone()
            },
            lora: trainer.lora.clone(),
            tokenizer: &tok,
            base_model: "tiny-f32".into(),
        };
        let other = t
            .run(tiny(true).0, &facts(8), out.path(), false)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(other, e, "log_every {every}");
    }
}

#[test]
fn bad_settings_are_named() {
    let (_, tok) = tiny(false);
    let run =
        |lora: LoraConfig, train: TrainConfig, facts: Vec<engram_facts::Fact>, autodiff: bool| {
            let trainer = Trainer {
                tokenizer: &tok,
                lora,
                train,
                base_model: "tiny".into(),
            };
            let out = tempfile::tempdir().unwrap();
            trainer
                .run(tiny(autodiff).0, &facts, out.path(), false)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
    let e = run(LoraConfig::new(0), quick(1, 1e-3), facts(2), true);
    assert!(e.contains("rank"), "{e}");
    let e = run(LoraConfig::new(2), quick(1, 1e-3), Vec::new(), true);
    assert!(e.contains("empty"), "{e}");
    let e = run(
        LoraConfig::new(2),
        TrainConfig {
            max_len: Some(10),
            ..quick(1, 1e-3)
        },
        facts(2),
        true,
    );
    assert!(
        e.contains("fact `f0`") && e.contains("context window of 10"),
        "{e}"
    );
    let e = run(LoraConfig::new(2), quick(1, 1e-3), facts(2), false);
    assert!(e.contains("autodiff"), "{e}");
    let mut empty_answer = facts(2);
    empty_answer[1].answer = " ".into();
    let e = run(LoraConfig::new(2), quick(1, 1e-3), empty_answer, true);
    assert!(e.contains("fact `f1`") && e.contains("empty answer"), "{e}");
}

#[test]
fn ranks_above_full_rank_and_bf16_bases_train() {
    let _g = train_lock();
    let (_, tok) = tiny(false);
    // Rank 128 exceeds every layer's full rank (hidden 64, kv 32): allowed, as in PEFT.
    let ckpt = engram_testkit::tiny_ckpt();
    for dtype in [
        engram_model::WeightDType::F32,
        engram_model::WeightDType::BF16,
    ] {
        let device = burn::tensor::Device::flex().autodiff();
        let model = engram_model::Llama::load(&ckpt, dtype, &device).unwrap();
        let before = base_weights(&model);
        let trainer = Trainer {
            tokenizer: &tok,
            lora: LoraConfig::new(128),
            train: TrainConfig {
                checkpoints: false,
                ..quick(2, 1e-3)
            },
            base_model: "tiny-f32".into(),
        };
        let out = tempfile::tempdir().unwrap();
        let done = trainer.run(model, &facts(4), out.path(), false).unwrap();
        assert!(done.record.epochs.iter().all(|e| e.loss.is_finite()));
        assert_eq!(base_weights(&done.model), before, "{dtype:?} base changed");
        for (_, _, ad) in done.model.adapters() {
            assert_eq!(ad.rank(), 128);
            assert_eq!(ad.lora_a.val().dtype(), burn::tensor::DType::F32);
            assert_eq!(ad.lora_b.val().dtype(), burn::tensor::DType::F32);
        }
        let first = done.model.adapters()[0].2;
        if dtype == engram_model::WeightDType::BF16 {
            assert_eq!(
                done.model.linear(0, LoraTarget::Q).weight.val().dtype(),
                burn::tensor::DType::BF16
            );
        }
        assert!(first.lora_b.val().abs().sum().into_scalar::<f32>() > 0.0);
    }
}

/// `graph = true` on the CPU, which has no graphs (the fixed-shape step's code runs for every
/// step): the record names the run's one step shape; with dropout off the epoch losses follow
/// the eager run's (the fixed shape's rounding apart: composed cross-entropy, `1 / labels`
/// multiplied, f32 bias corrections); and with dropout on, a run stopped in its second epoch
/// and resumed ends on the uninterrupted run's adapter bit for bit (the capture's warm-up steps
/// are taken again after the resume, the dropout keys and AdamW's step restored).
#[test]
fn a_graph_run_takes_one_shape_follows_the_eager_run_and_resumes_exactly() {
    let _g = train_lock();
    let facts = facts(9);
    let (_, tok) = tiny(false);
    // 9 facts in batches of 2: 5 steps an epoch, the last one row short.
    let cfg = |graph: bool| TrainConfig {
        batch_size: 2,
        graph,
        ..quick(4, 5e-3)
    };
    let trainer = |graph: bool, dropout: f64| Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(4).with_dropout(dropout),
        train: cfg(graph),
        base_model: "tiny-f32".into(),
    };
    let run = |graph: bool, dropout: f64| {
        let out = tempfile::tempdir().unwrap();
        let (model, _) = tiny(true);
        let done = trainer(graph, dropout)
            .run(model, &facts, out.path(), false)
            .unwrap();
        (done.record, out)
    };
    let (eager, _) = run(false, 0.0);
    let (graph, _) = run(true, 0.0);
    let g = graph
        .step_graph
        .as_ref()
        .expect("the record names the step graph");
    assert!(!g.hardware, "the CPU backend records no graph");
    let examples = engram_lora::build_examples(&tok, &facts, usize::MAX).unwrap();
    let longest = examples.iter().map(|e| e.ids.len()).max().unwrap();
    assert_eq!(
        (g.shape.micro, g.shape.rows, g.shape.len),
        (1, 2, longest),
        "{g:?}"
    );
    assert!(eager.step_graph.is_none());
    let (e, k) = (eager.epoch_losses(), graph.epoch_losses());
    eprintln!("eager {e:.6?}\ngraph {k:.6?}");
    assert_follows(&e, &k, 1e-4, ("eager", "graph"));
    assert!(k.windows(2).all(|w| w[1] < w[0]), "the loss falls: {k:?}");
    assert_eq!(
        graph.epochs.iter().map(|e| e.steps).collect::<Vec<_>>(),
        vec![5; 4]
    );
    assert_eq!(
        graph.epochs.iter().map(|e| e.tokens).collect::<Vec<_>>(),
        eager.epochs.iter().map(|e| e.tokens).collect::<Vec<_>>(),
        "tokens count the examples' own, not the padding"
    );

    let (full, full_dir) = run(true, 0.05);
    let cut = tempfile::tempdir().unwrap();
    let (model, _) = tiny(true);
    // The capture advances three steps at once: stopped after step 7, in epoch 2.
    let progress = StopAfter::new(7);
    let e = trainer(true, 0.05)
        .run_until(model, &facts, cut.path(), false, &progress, progress.stop())
        .err()
        .unwrap();
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
    let (model, _) = tiny(true);
    let resumed = trainer(true, 0.05)
        .run(model, &facts, cut.path(), true)
        .unwrap();
    assert_eq!(resumed.record.resumed_after_epoch, Some(1));
    assert_eq!(adapter_bytes(cut.path()), adapter_bytes(full_dir.path()));
    assert_eq!(resumed.record.epoch_losses(), full.epoch_losses());
}

/// `graph = true` with two micro-batches a step, on the CPU: 13 facts in batches of 2 make 4
/// steps an epoch, the last a micro-batch of one row and one of padding (no rows, no labels).
/// The fixed-shape step accumulates as the eager one does: with dropout off (the two draw
/// their masks from different streams) the epoch losses follow the eager run's, and the tokens
/// count the examples only.
#[test]
fn a_graph_run_accumulates_micro_batches_as_the_eager_run_does() {
    let _g = train_lock();
    let facts = facts(13);
    let (_, tok) = tiny(false);
    let run = |graph: bool| {
        let trainer = Trainer {
            tokenizer: &tok,
            lora: LoraConfig::new(4).with_dropout(0.0),
            train: TrainConfig {
                batch_size: 2,
                grad_accum: 2,
                graph,
                ..quick(4, 5e-3)
            },
            base_model: "tiny-f32".into(),
        };
        let out = tempfile::tempdir().unwrap();
        let (model, _) = tiny(true);
        trainer
            .run(model, &facts, out.path(), false)
            .unwrap()
            .record
    };
    let (eager, graph) = (run(false), run(true));
    let g = graph
        .step_graph
        .as_ref()
        .expect("the record names the step graph");
    assert_eq!((g.shape.micro, g.shape.rows), (2, 2), "{g:?}");
    let steps = |r: &engram_lora::TrainRecord| r.epochs.iter().map(|e| e.steps).collect::<Vec<_>>();
    assert_eq!(steps(&graph), vec![4; 4]);
    assert_eq!(steps(&eager), steps(&graph));
    let (e, k) = (eager.epoch_losses(), graph.epoch_losses());
    eprintln!("eager {e:.6?}\ngraph {k:.6?}");
    assert_follows(&e, &k, 1e-5, ("eager", "graph"));
    assert!(k.windows(2).all(|w| w[1] < w[0]), "the loss falls: {k:?}");
    assert_eq!(
        graph.epochs.iter().map(|e| e.tokens).collect::<Vec<_>>(),
        eager.epochs.iter().map(|e| e.tokens).collect::<Vec<_>>(),
    );
}
