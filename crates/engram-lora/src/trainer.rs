//! The LoRA trainer (TOFU / EnronQA conventions): AdamW on the adapters only, linear warm-up and
//! linear decay ([`crate::schedule`]), gradient accumulation and clipping ([`crate::step`]),
//! length-bucketed shuffled batches ([`crate::batches`]), per-epoch checkpoints and exact
//! resume ([`crate::checkpoint`]); a stop request ([`engram_io::Stop`]) ends a run at a step
//! boundary, resumable from its newest checkpoint. Progress goes to an [`engram_io::Progress`];
//! nothing here prints.

use std::path::{Path, PathBuf};
use std::time::Instant;

use engram_facts::Fact;
use engram_io::{Progress, Quiet, Stop};
use engram_model::kernel_cache::{self, CompileSummary};
use engram_model::{Llama, LoraConfig};
use engram_tokenizer::ChatTokenizer;
use sha2::{Digest, Sha256};

use crate::adamw::AdamW;
use crate::batches::epoch_batches;
use crate::checkpoint::{self, TrainerState};
use crate::config::TrainConfig;
use crate::epoch_eval::EpochEval;
use crate::error::{LoraError, Result};
use crate::examples::{TrainExample, build_examples};
use crate::fixed_steps::StepShape;
use crate::losses::{LossLog, ReadError};
use crate::optimizer_state;
use crate::peft::save_adapter;
use crate::record::{EpochRecord, StepGraphRecord, TrainRecord};
use crate::schedule::LinearSchedule;
use crate::step::{optimizer, optimizer_settings};
use crate::stepper::{Plan, Stepper};
use engram_model::memory_hint;

/// What a run that ran out of device memory can make smaller.
const LOWER_MEMORY: &str = "lower the batch size, the rank or the examples' length (`engram sweep --dry-run` gives the planner's peak-memory estimate)";

/// The trained model (adapters attached) and the record of the run.
pub struct TrainOutcome {
    /// The model with its trained adapters, on the training device.
    pub model: Llama,
    /// What happened.
    pub record: TrainRecord,
    /// Where the final adapter was written.
    pub adapter_dir: PathBuf,
    /// The optimizer (its state covers the adapters only).
    pub optimizer: AdamW,
}

/// Trains adapters on facts.
pub struct Trainer<'a> {
    /// The model's tokenizer.
    pub tokenizer: &'a ChatTokenizer,
    /// Adapter hyper-parameters.
    pub lora: LoraConfig,
    /// Training settings.
    pub train: TrainConfig,
    /// Name of the base model, written to `adapter_config.json`.
    pub base_model: String,
}

/// The tokenized facts and everything derived from them that a run needs.
struct Data {
    examples: Vec<TrainExample>,
    lengths: Vec<usize>,
    pad_id: u32,
    /// Packed row length (`layout = "packed"`).
    pack: Option<usize>,
    fingerprint: String,
    schedule: LinearSchedule,
    /// The one shape of every step (`graph = true`).
    shape: Option<StepShape>,
}

/// A run in progress: the optimizer, the counters and the record (the model travels by value
/// beside it, so that optimizer steps update its tensors in place).
struct Run {
    optim: AdamW,
    state: TrainerState,
    record: TrainRecord,
    record_path: PathBuf,
    /// The process's compile work when the run began, on a GPU backend.
    kernels_before: Option<CompileSummary>,
}

impl Run {
    fn write_record(&self) -> Result<()> {
        let json = serde_json::to_vec_pretty(&self.record).expect("json");
        Ok(engram_io::write_file(&self.record_path, &json)?)
    }

    /// Writes the record as the run ends (finished, stopped or diverged), with its compile
    /// work: a read of the kernel cache's database, kept out of the per-epoch writes.
    fn write_final_record(&mut self) -> Result<()> {
        if let Some(before) = &self.kernels_before {
            self.record.kernels = Some(kernel_cache::summary().since(before));
        }
        self.write_record()
    }

    /// Ends the run with `err`: the record says `status` and the error, and is written.
    fn end<T>(&mut self, status: &str, err: LoraError) -> Result<T> {
        self.record.status = status.into();
        self.record.error = Some(err.to_string());
        self.write_final_record()?;
        Err(err)
    }
}

/// Checks a run's settings that need no model (counts, rates, the adapter's rank, alpha,
/// dropout and targets), so that a command can refuse them before it loads one; training checks
/// them again with the model, which adds the device and the layer subset.
pub fn check_settings(lora: &LoraConfig, t: &TrainConfig) -> Result<()> {
    let bad = |m: String| Err(LoraError::BadSetting(m));
    if t.epochs == 0 {
        return bad("epochs = 0: must be at least 1".into());
    }
    if t.batch_size == 0 {
        return bad("batch_size = 0: must be at least 1".into());
    }
    if t.grad_accum == 0 {
        return bad("grad_accum = 0: must be at least 1".into());
    }
    if !(t.lr.is_finite() && t.lr > 0.0) {
        return bad(format!("lr = {}: must be a positive number", t.lr));
    }
    if !t.warmup_epochs.is_finite() || t.warmup_epochs < 0.0 {
        return bad(format!(
            "warmup_epochs = {}: must be a number ≥ 0",
            t.warmup_epochs
        ));
    }
    if !t.weight_decay.is_finite() || t.weight_decay < 0.0 {
        return bad(format!(
            "weight_decay = {}: must be a number ≥ 0 (as torch.optim.AdamW requires)",
            t.weight_decay
        ));
    }
    if let Some(n) = t.max_grad_norm.filter(|n| !n.is_finite() || *n < 0.0) {
        return bad(format!(
            "max_grad_norm = {n}: must be a positive number (0 turns clipping off)"
        ));
    }
    if t.eval_sample == Some(0) {
        return bad(
            "eval_sample = 0: must be at least 1 (eval_every = 0 turns the evaluation off)".into(),
        );
    }
    if t.layout.is_padded() && t.pack_length.is_some() {
        return bad("pack_length applies to layout = \"packed\" only".into());
    }
    if t.graph && !t.layout.is_padded() {
        return bad(
            "graph = true takes the padded layout (every step padded to the run's longest \
             example); drop layout = \"packed\" or the graph"
                .into(),
        );
    }
    if t.graph && t.grad_accum > crate::graph::MAX_MICRO_BATCHES {
        return bad(format!(
            "grad_accum = {}: graph = true takes at most {} micro-batches a step (raise \
             batch_size instead, or drop the graph)",
            t.grad_accum,
            crate::graph::MAX_MICRO_BATCHES
        ));
    }
    lora.validate_values()?;
    Ok(())
}

impl Trainer<'_> {
    fn validate(&self, model: &Llama) -> Result<()> {
        check_settings(&self.lora, &self.train)?;
        let bad = |m: &str| Err(LoraError::BadSetting(m.to_string()));
        let device = model.device();
        if !device.is_autodiff() {
            return bad("training needs an autodiff device (Device::autodiff())");
        }
        if model.embed_tokens.val().dtype() == burn::tensor::DType::F16
            && device.inner() != burn::tensor::Device::flex()
        {
            return bad(
                "f16 LoRA training is refused on GPU backends: Burn reports wrong f16 gradients \
                 there (tracel-ai/burn#5162); train with --dtype bf16 or f32",
            );
        }
        self.lora.validate(model.layers.len())?;
        let window = model.config.max_position_embeddings;
        if let Some(n) = self.train.max_len.filter(|&n| n > window) {
            return Err(LoraError::BadSetting(format!(
                "max_len = {n}: over the model's context window of {window} tokens (positions \
                 it never saw; for Mistral, its sliding window, past which transformers \
                 attends differently)"
            )));
        }
        Ok(())
    }

    /// The training settings as a run's fingerprint hashes them: as they were hashed before
    /// `log_every` existed (checkpoint keys fixed, `log_every` left out), so older runs resume.
    fn fingerprint_settings(train: &TrainConfig) -> Vec<u8> {
        let mut t = train.outcome_json();
        let o = t.as_object_mut().expect("object");
        o.insert("checkpoints".into(), true.into());
        o.insert("keep_checkpoints".into(), 0.into());
        serde_json::to_vec(&t).expect("json")
    }

    fn fingerprint(&self, examples: &[TrainExample]) -> String {
        let mut h = Sha256::new();
        h.update(format!("{:?}", self.lora).as_bytes());
        h.update(Self::fingerprint_settings(&self.train));
        h.update(self.base_model.as_bytes());
        for e in examples {
            h.update(e.id.as_bytes());
            for id in &e.ids {
                h.update(id.to_le_bytes());
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Tokenizes `facts` and lays out the schedule.
    fn prepare(&self, model: &Llama, facts: &[Fact]) -> Result<Data> {
        let t = &self.train;
        let window = t.max_len.unwrap_or(model.config.max_position_embeddings);
        let examples = build_examples(self.tokenizer, facts, window)?;
        let pad_id = self.tokenizer.pad_id().ok_or_else(|| {
            LoraError::BadSetting("the tokenizer has no pad, eot or eos token".into())
        })?;
        let steps_per_epoch = examples.len().div_ceil(t.batch_size).div_ceil(t.grad_accum);
        let lengths: Vec<usize> = examples.iter().map(|e| e.ids.len()).collect();
        let longest = lengths.iter().copied().max().unwrap_or(0);
        let pack = t.packed_rows(longest).map_err(LoraError::BadSetting)?;
        Ok(Data {
            shape: t.graph.then(|| StepShape::of_run(&examples, t)),
            lengths,
            pack,
            fingerprint: self.fingerprint(&examples),
            examples,
            pad_id,
            schedule: LinearSchedule {
                base: t.lr,
                warmup: (t.warmup_epochs * steps_per_epoch as f64).round() as usize,
                total: t.epochs * steps_per_epoch,
                decay: t.decay,
            },
        })
    }

    /// A fresh run on `model`, or (with `resume`) the newest checkpoint's run in `out`.
    fn start(
        &self,
        model: Llama,
        data: &Data,
        facts: usize,
        out: &Path,
        resume: bool,
    ) -> Result<(Llama, Run)> {
        let latest = checkpoint::latest(out)?;
        if latest.is_some() && !resume {
            return Err(LoraError::Resume {
                path: checkpoint::checkpoints_dir(out),
                problem: "this output directory already holds checkpoints of a run; pass --resume to continue it, or choose another --out".into(),
            });
        }
        let (model, optim, state, resumed_after) = match latest {
            Some(r) => {
                if r.state.fingerprint != data.fingerprint {
                    return Err(LoraError::Resume {
                        path: r.dir,
                        problem: "it was made with other settings, facts or base model".into(),
                    });
                }
                let model = r.adapter.apply(model)?;
                let optim = optimizer_state::load(&r.dir, &model, optimizer_settings(&self.train))?;
                let after = r.state.epoch;
                (model, optim, r.state, Some(after))
            }
            None => (
                model.with_lora(&self.lora)?,
                optimizer(&self.train),
                TrainerState {
                    epoch: 0,
                    global_step: 0,
                    fingerprint: data.fingerprint.clone(),
                    epochs: Vec::new(),
                },
                None,
            ),
        };
        let model = model.with_adapter_compute(self.train.adapter_compute.dtype())?;
        let record = TrainRecord {
            status: "running".into(),
            error: None,
            base_model: self.base_model.clone(),
            facts,
            rank: self.lora.rank,
            alpha: self.lora.alpha,
            trainable_params: model.lora_parameter_count(),
            total_params: model.parameter_count(),
            train: self.train.clone(),
            resumed_after_epoch: resumed_after,
            epochs: state.epochs.clone(),
            kernels: None,
            step_graph: None,
        };
        let run = Run {
            optim,
            state,
            record,
            record_path: out.join(crate::record::TRAIN_RECORD),
            kernels_before: (!engram_model::is_cpu(&model.device()))
                .then(kernel_cache::state)
                .flatten()
                .map(|_| kernel_cache::summary()),
        };
        Ok((model, run))
    }

    /// Trains epoch `epoch` (0-based) of `run`. Step losses stay on the device and are read
    /// every `log_every` steps and at the epoch's end ([`LossLog`]); a non-finite loss ends the
    /// run at that read, named by its own step, with the record written as `diverged` (and no
    /// checkpoint of the diverged weights).
    fn epoch(
        &self,
        run: &mut Run,
        mut stepper: Stepper,
        data: &Data,
        epoch: usize,
        progress: &dyn Progress,
        stop: &Stop,
    ) -> Result<(Stepper, EpochRecord)> {
        let t = &self.train;
        let t0 = Instant::now();
        let batches = epoch_batches(&data.lengths, t.batch_size, t.seed, epoch);
        let (mut tokens, mut labels, mut loss_sum, mut steps, mut lr) = (0, 0, 0.0, 0, 0.0);
        let mut log = LossLog::new();
        let mut last_loss = None;
        let groups: Vec<&[Vec<usize>]> = batches.chunks(t.grad_accum).collect();
        let plan = Plan {
            examples: &data.examples,
            pad_id: data.pad_id,
            pack: data.pack,
            schedule: &data.schedule,
            cfg: t,
        };
        let mut i = 0;
        while i < groups.len() {
            if let Some(signal) = stop.requested() {
                let err = LoraError::Stopped {
                    signal,
                    epoch: epoch + 1,
                    saved: run.state.epoch,
                };
                return run.end("stopped", err);
            }
            let (next, taken, captured) =
                stepper.take(&mut run.optim, &groups, i, run.state.global_step, &plan);
            stepper = next;
            if let Some(c) = captured {
                if c.asked && !c.hardware {
                    // Burn's capture fell back to running the recording, which took a step of
                    // stale data: the run cannot go on as a graph run.
                    let err = LoraError::BadSetting(format!(
                        "graph = true: {} did not record the optimizer step as a graph (the \
                         capture ran it instead, one step twice); train without the graph",
                        engram_model::device::describe(&stepper.device())
                    ));
                    return run.end("failed", err);
                }
                let shape = data.shape.expect("a graph run's shape");
                progress.note(&format!(
                    "step graph: {} in {:.1} s (its first {} steps); every step padded to {} × {} tokens",
                    if c.hardware {
                        "captured"
                    } else {
                        "none on this backend (the CPU), the same step runs each time; set up"
                    },
                    c.seconds,
                    taken.len(),
                    shape.rows,
                    shape.len,
                ));
                run.record.step_graph = Some(StepGraphRecord {
                    hardware: c.hardware,
                    capture_seconds: c.seconds,
                    shape,
                });
            }
            for s in &taken {
                lr = s.lr;
                log.push(s.step, s.lr, s.labels, s.loss.clone());
                tokens += s.tokens;
            }
            run.state.global_step += taken.len();
            steps += taken.len();
            i += taken.len();
            if log.pending() >= t.read_interval() || i == groups.len() {
                match log.read() {
                    Ok(read) => {
                        for s in read {
                            labels += s.labels;
                            loss_sum += s.loss * s.labels as f64;
                            last_loss = Some(s.loss);
                        }
                    }
                    Err(ReadError::Device {
                        first_step,
                        last_step,
                        message,
                    }) => {
                        let err = LoraError::Device {
                            device: engram_model::device::describe(&stepper.device()),
                            epoch: epoch + 1,
                            first_step: first_step + 1,
                            last_step: last_step + 1,
                            hint: memory_hint(&message, LOWER_MEMORY),
                            message,
                            saved: run.state.epoch,
                        };
                        return run.end("failed", err);
                    }
                    Err(ReadError::NonFinite(s)) => {
                        let err = LoraError::NonFiniteLoss {
                            epoch: epoch + 1,
                            step: s.step + 1,
                            loss: s.loss,
                            lr: s.lr,
                        };
                        return run.end("diverged", err);
                    }
                }
            }
            let secs = t0.elapsed().as_secs_f64();
            progress.status(&format!(
                "epoch {}/{} loss {} {:.0} tok/s",
                epoch + 1,
                t.epochs,
                last_loss.map_or("…".into(), |l| format!("{l:.4}")),
                tokens as f64 / secs.max(1e-9)
            ));
            progress.advance(taken.len() as u64);
        }
        let seconds = t0.elapsed().as_secs_f64();
        let rec = EpochRecord {
            epoch: epoch + 1,
            loss: loss_sum / labels.max(1) as f64,
            steps,
            tokens,
            label_tokens: labels,
            seconds,
            tokens_per_s: tokens as f64 / seconds.max(1e-9),
            lr,
            exact_match: None,
        };
        Ok((stepper, rec))
    }

    /// The remaining epochs of `run`, each checkpointed and recorded.
    #[allow(clippy::too_many_arguments)]
    fn epochs(
        &self,
        run: &mut Run,
        model: Llama,
        data: &Data,
        out: &Path,
        progress: &dyn Progress,
        stop: &Stop,
        eval: Option<&dyn EpochEval>,
    ) -> Result<Llama> {
        let mut stepper = match data.shape {
            Some(shape) => {
                let graph = !engram_model::is_cpu(&model.device());
                Stepper::Waiting(model, shape, graph)
            }
            None => Stepper::Eager(model),
        };
        for epoch in run.state.epoch..self.train.epochs {
            let mut rec;
            (stepper, rec) = self.epoch(run, stepper, data, epoch, progress, stop)?;
            if let Some(eval) = eval.filter(|_| self.train.evaluates_after(epoch + 1)) {
                progress.status(&format!("epoch {}: evaluating", epoch + 1));
                let figure = stepper.with_state(&run.optim, |model, _| eval.measure(model));
                let figure = figure.map_err(|message| LoraError::Eval {
                    epoch: epoch + 1,
                    message,
                })?;
                rec.exact_match = Some(figure);
            }
            progress.note(&rec.summary());
            run.state.epoch = epoch + 1;
            run.state.epochs.push(rec);
            run.record.epochs = run.state.epochs.clone();
            if self.train.checkpoints {
                stepper.with_state(&run.optim, |model, optim| {
                    checkpoint::save(
                        out,
                        |dir| self.save_adapter(model, dir),
                        |path| optimizer_state::save(optim, model, path),
                        &run.state,
                        self.train.keep_checkpoints,
                    )
                })?;
            }
            run.write_record()?;
        }
        Ok(stepper.finish(&mut run.optim))
    }

    /// Writes the adapter `model` carries into `dir` (PEFT layout, tensor by tensor).
    fn save_adapter(&self, model: &Llama, dir: &Path) -> Result<()> {
        save_adapter(model, &self.lora, Some(self.base_model.clone()), dir)
    }

    /// [`Trainer::run_with`], reporting nothing.
    pub fn run(
        &self,
        model: Llama,
        facts: &[Fact],
        out: &Path,
        resume: bool,
    ) -> Result<TrainOutcome> {
        self.run_with(model, facts, out, resume, &Quiet)
    }

    /// Trains adapters on `facts` (rephrased question → answer) and writes the final adapter
    /// to `out` (PEFT layout), `out/train_record.json`, and per-epoch checkpoints under
    /// `out/checkpoints/`. With `resume`, continues from the newest checkpoint of the same run.
    /// Reports a `train` task of one step per optimizer step, a status line per step and a
    /// note per epoch to `progress`.
    pub fn run_with(
        &self,
        model: Llama,
        facts: &[Fact],
        out: &Path,
        resume: bool,
        progress: &dyn Progress,
    ) -> Result<TrainOutcome> {
        self.run_until(model, facts, out, resume, progress, &Stop::new())
    }

    /// [`Trainer::run_with`] that ends early when `stop` is requested: at the next optimizer
    /// step boundary it returns [`LoraError::Stopped`], having written the record as `stopped`
    /// and left the newest epoch checkpoint as it was. The unfinished epoch's steps are
    /// dropped, so that a run resumed from that checkpoint (`resume`) retraces exactly the
    /// steps an uninterrupted run takes. A request during an epoch's last step lets the epoch
    /// finish and be checkpointed first; one after the last epoch's last step changes nothing.
    pub fn run_until(
        &self,
        model: Llama,
        facts: &[Fact],
        out: &Path,
        resume: bool,
        progress: &dyn Progress,
        stop: &Stop,
    ) -> Result<TrainOutcome> {
        self.run_evaluated(model, facts, out, resume, progress, stop, None)
    }

    /// [`Trainer::run_until`] that, with `eval_every` set, asks `eval` after every
    /// `eval_every`-th epoch and after the last, and keeps its figure in that epoch's record
    /// (before the epoch's checkpoint, so a resumed run keeps the curve so far). Without an
    /// evaluator `eval_every` records nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn run_evaluated(
        &self,
        model: Llama,
        facts: &[Fact],
        out: &Path,
        resume: bool,
        progress: &dyn Progress,
        stop: &Stop,
        eval: Option<&dyn EpochEval>,
    ) -> Result<TrainOutcome> {
        self.validate(&model)?;
        let data = self.prepare(&model, facts)?;
        std::fs::create_dir_all(out).map_err(LoraError::io(out))?;
        let (model, mut run) = self.start(model, &data, facts.len(), out, resume)?;
        progress.note(&model.trainable_parameters_line());
        progress.begin("train", Some(data.schedule.total as u64));
        progress.set_position(run.state.global_step as u64);
        let trained = self.epochs(&mut run, model, &data, out, progress, stop, eval);
        progress.end();
        let model = trained?;
        self.save_adapter(&model, out)?;
        run.record.status = "finished".into();
        run.write_final_record()?;
        Ok(TrainOutcome {
            model,
            record: run.record,
            adapter_dir: out.to_path_buf(),
            optimizer: run.optim,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_hash_the_settings_as_before_log_every() {
        let t = TrainConfig {
            log_every: 3,
            keep_checkpoints: 5,
            checkpoints: false,
            ..TrainConfig::default()
        };
        // The bytes engram hashed when TrainConfig had no `log_every`.
        let before = r#"{"epochs":10,"lr":0.0001,"batch_size":8,"grad_accum":1,"warmup_epochs":1.0,"decay":true,"weight_decay":0.0,"max_grad_norm":1.0,"seed":0,"max_len":null,"checkpoints":true,"keep_checkpoints":0}"#;
        assert_eq!(
            String::from_utf8(Trainer::fingerprint_settings(&t)).unwrap(),
            before
        );
    }
}
