//! The memorization curve (`eval_every`): a real training run on the tiny fixture asks its
//! evaluator after the epochs it should, the figures are the greedy exact match on the trained
//! questions (the last one equal to what answering after training gives), and a resumed run
//! keeps the curve it had.

use engram_experiments::SampleExactMatch;
use engram_judge::exact_match;
use engram_lora::{EpochEval, TrainConfig, Trainer};
use engram_model::{AnswerConfig, LoraConfig, answer_questions};
use engram_testkit::{tiny, train_lock};
use engram_tokenizer::ChatTokenizer;

/// The gpu-check's 4 facts (the first of the synthetic EnronQA-style fixture).
fn facts(n: usize) -> Vec<engram_facts::Fact> {
    let all =
        engram_facts::read_facts(&engram_testkit::fixtures().join("facts/synthetic-20.jsonl"))
            .unwrap();
    all.into_iter().take(n).collect()
}

/// Greedy answers that end at the tiny model's end-of-turn tokens, as a session's do.
fn answering(tok: &ChatTokenizer) -> AnswerConfig {
    let (model, _) = tiny(false);
    AnswerConfig {
        stop_ids: tok.stop_ids(&model.config.eos_token_ids),
        ..AnswerConfig::default()
    }
}

/// The gpu-check's tiny memorization run: 4 facts, rank 8, lr 1e-2 held constant, no dropout.
fn settings(epochs: usize, eval_every: usize) -> TrainConfig {
    TrainConfig {
        epochs,
        lr: 1e-2,
        batch_size: 4,
        warmup_epochs: 0.0,
        decay: false,
        checkpoints: true,
        eval_every,
        ..TrainConfig::default()
    }
}

#[test]
fn the_curve_is_measured_after_the_asked_epochs_and_rises_to_what_the_model_answers() {
    let _g = train_lock();
    let (model, tok) = tiny(true);
    let facts = facts(4);
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(8).with_dropout(0.0).with_init_seed(0),
        train: settings(60, 20),
        base_model: "tiny-f32".into(),
    };
    let answer_cfg = answering(&tok);
    let curve = SampleExactMatch::new(&tok, &facts, 32, answer_cfg.clone());
    assert_eq!(
        curve.len(),
        4,
        "a sample larger than the facts is all of them"
    );
    let out = tempfile::tempdir().unwrap();
    let done = trainer
        .run_evaluated(
            model,
            &facts,
            out.path(),
            false,
            &engram_io::Quiet,
            &engram_io::Stop::new(),
            Some(&curve as &dyn EpochEval),
        )
        .unwrap();
    let points: Vec<(usize, f64)> = done
        .record
        .epochs
        .iter()
        .filter_map(|e| e.exact_match.map(|m| (e.epoch, m)))
        .collect();
    eprintln!("curve: {points:?}");
    assert_eq!(
        points.iter().map(|p| p.0).collect::<Vec<_>>(),
        vec![20, 40, 60],
        "every 20th epoch and the last"
    );
    // The last point is what answering the trained questions after training gives.
    let qs: Vec<String> = facts.iter().map(|f| f.rephrased_question.clone()).collect();
    let answers = answer_questions(&done.model, &tok, &qs, &answer_cfg, None).unwrap();
    let after = answers
        .iter()
        .zip(&facts)
        .filter(|(a, f)| exact_match(&a.text, &f.answer))
        .count() as f64
        / 4.0;
    assert_eq!(points[2].1, after);
    assert_eq!(
        after, 1.0,
        "the run memorizes its 4 facts (as gpu-check's does)"
    );
    // The untrained model answers none of them: the curve starts below where it ends.
    let (base, _) = tiny(false);
    assert_eq!(curve.measure(&base).unwrap(), 0.0);
    // The record on disk carries the curve.
    let text = std::fs::read_to_string(out.path().join(engram_lora::TRAIN_RECORD)).unwrap();
    assert_eq!(text.matches("\"exact_match\"").count(), 3, "{text}");
}

/// Asks `inner`, and requests `stop` once it has been asked `after` times.
struct StopAfter<'a> {
    inner: &'a SampleExactMatch<'a>,
    stop: engram_io::Stop,
    after: usize,
    asked: std::cell::Cell<usize>,
}

impl EpochEval for StopAfter<'_> {
    fn measure(&self, model: &engram_model::Llama) -> Result<f64, String> {
        self.asked.set(self.asked.get() + 1);
        if self.asked.get() == self.after {
            self.stop.request(15);
        }
        self.inner.measure(model)
    }
}

#[test]
fn a_resumed_run_keeps_the_curve_so_far_and_a_zero_sample_is_named() {
    let _g = train_lock();
    let (model, tok) = tiny(true);
    let facts = facts(4);
    let curve = SampleExactMatch::new(&tok, &facts, 2, answering(&tok));
    assert_eq!(curve.len(), 2);
    let out = tempfile::tempdir().unwrap();
    let trainer = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(8).with_dropout(0.0).with_init_seed(0),
        train: settings(6, 2),
        base_model: "tiny-f32".into(),
    };
    // Stopped (as by a signal) after epoch 4's figure: the checkpoint holds 4 epochs.
    let stop = engram_io::Stop::new();
    let stopper = StopAfter {
        inner: &curve,
        stop: stop.clone(),
        after: 2,
        asked: std::cell::Cell::new(0),
    };
    let stopped = trainer.run_evaluated(
        model.clone(),
        &facts,
        out.path(),
        false,
        &engram_io::Quiet,
        &stop,
        Some(&stopper as &dyn EpochEval),
    );
    assert!(stopped.is_err(), "the stop request ends the run");
    let text = std::fs::read_to_string(out.path().join(engram_lora::TRAIN_RECORD)).unwrap();
    let record: engram_lora::TrainRecord = serde_json::from_str(&text).unwrap();
    let before: Vec<Option<f64>> = record.epochs.iter().map(|e| e.exact_match).collect();
    assert_eq!(before.len(), 4, "{before:?}");
    assert!(before[0].is_none() && before[2].is_none(), "{before:?}");
    assert!(
        [before[1], before[3]]
            .iter()
            .all(|m| m.is_some_and(|v| [0.0, 0.5, 1.0].contains(&v))),
        "2 questions: 0, 1/2 or 1 — {before:?}"
    );
    // Resumed: epochs 1-4 keep their figures, epoch 6 gets one, epoch 5 none.
    let resumed = trainer
        .run_evaluated(
            model.clone(),
            &facts,
            out.path(),
            true,
            &engram_io::Quiet,
            &engram_io::Stop::new(),
            Some(&curve as &dyn EpochEval),
        )
        .unwrap();
    let after: Vec<Option<f64>> = resumed
        .record
        .epochs
        .iter()
        .map(|e| e.exact_match)
        .collect();
    assert_eq!(resumed.record.resumed_after_epoch, Some(4));
    assert_eq!(&after[..4], &before[..]);
    assert!(after[4].is_none() && after[5].is_some(), "{after:?}");

    let bad = Trainer {
        tokenizer: &tok,
        lora: LoraConfig::new(8),
        train: TrainConfig {
            eval_sample: Some(0),
            ..settings(1, 1)
        },
        base_model: "tiny-f32".into(),
    }
    .run(model, &facts, tempfile::tempdir().unwrap().path(), false);
    let e = bad.err().expect("eval_sample = 0 is refused").to_string();
    assert!(e.contains("eval_sample"), "{e}");
}
