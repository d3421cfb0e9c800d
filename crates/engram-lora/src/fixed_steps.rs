//! Every optimizer step of a run in one shape, for a captured step ([`crate::graph`]): a graph
//! replays fixed launches over fixed buffers, so each step's micro-batches are laid out in the
//! run's [`StepShape`] — `grad_accum` micro-batches of `batch_size` rows, each row right-padded
//! to the run's longest example, and as many label slots as the run's largest micro-batch can
//! need. What a step lacks is filler that contributes nothing: rows of padding (a short last
//! step), whole micro-batches of them, and label slots of weight 0.
//!
//! A step's host data ([`StepData`]) is written into one device buffer that stays in place
//! ([`StepSlots`]: one upload and one copy a step), as f32 (token ids and row indices are exact
//! in f32 below 2²⁴), and sliced and cast to integers inside the step; the learning rate and the
//! step's `1 / labels` travel in it too, so that a replay trains on the step it was given.
//!
//! The loss of a step in this shape is the same sum over its label tokens, divided by their
//! count, with two differences in rounding from the eager step ([`crate::loss::inputs_loss`]):
//! the cross-entropy is Burn's composed `log_softmax` and `gather` with each slot's weight (the
//! fused op has no weights) and the count's reciprocal multiplies the sum (the eager step
//! divides by the count).

use burn::tensor::{Bool, DType, Device, Int, Tensor, TensorData, s};
use engram_model::Llama;
use engram_model::mask::causal_mask;
use engram_ops::graph::assign;
use engram_ops::pick_rows::inverse_rows;
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::examples::TrainExample;
use crate::loss::{Batch, BatchInputs};

/// The shape every step of a captured run takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepShape {
    /// Micro-batches per step (`grad_accum`).
    pub micro: usize,
    /// Rows per micro-batch (`batch_size`).
    pub rows: usize,
    /// Slots per row: the run's longest example.
    pub len: usize,
    /// Label slots per micro-batch: the label tokens of the run's `rows` examples with the most.
    pub labels: usize,
}

impl StepShape {
    /// The shape that holds any micro-batch of `examples` under `cfg`.
    pub fn of_run(examples: &[TrainExample], cfg: &TrainConfig) -> Self {
        let len = examples
            .iter()
            .map(|e| e.ids.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let mut labels: Vec<usize> = examples.iter().map(TrainExample::label_count).collect();
        labels.sort_unstable_by(|a, b| b.cmp(a));
        let rows = cfg.batch_size.max(1);
        Self {
            micro: cfg.grad_accum.max(1),
            rows,
            len,
            labels: labels.iter().take(rows).sum::<usize>().max(1),
        }
    }

    /// Token slots of one micro-batch.
    pub fn slots(&self) -> usize {
        self.rows * self.len
    }

    /// Values one micro-batch takes in a step's buffer: ids and inverse (a slot each), picks,
    /// targets and weights (a label slot each).
    fn micro_values(&self) -> usize {
        2 * self.slots() + 3 * self.labels
    }
}

/// One micro-batch laid out in a [`StepShape`], as f32.
#[derive(Debug, Clone, PartialEq)]
struct MicroData {
    ids: Vec<f32>,
    at: Vec<f32>,
    inverse: Vec<f32>,
    targets: Vec<f32>,
    weights: Vec<f32>,
}

/// One optimizer step's host data in a run's [`StepShape`].
#[derive(Debug, Clone, PartialEq)]
pub struct StepData {
    micro: Vec<MicroData>,
    /// `1 / labels`.
    scale: f32,
    /// The learning rate.
    lr: f32,
    /// The step's label tokens.
    pub labels: usize,
    /// Its non-padding tokens.
    pub tokens: usize,
}

impl StepData {
    /// The step as [`StepSlots`] holds it: each micro-batch's ids, picks, inverse, targets and
    /// weights, then the scale and the learning rate.
    fn values(&self) -> Vec<f32> {
        let mut v = Vec::new();
        for m in &self.micro {
            for part in [&m.ids, &m.at, &m.inverse, &m.targets, &m.weights] {
                v.extend_from_slice(part);
            }
        }
        v.extend([self.scale, self.lr]);
        v
    }

    /// The micro-batches `group` (indices into `examples`) of one step at learning rate `lr`,
    /// padded with `pad_id` into `shape`.
    ///
    /// # Panics
    /// When `group` does not fit `shape` (more micro-batches, rows or label tokens, or a longer
    /// example, than the shape of the run it came from holds).
    pub fn lay_out(
        examples: &[TrainExample],
        group: &[Vec<usize>],
        pad_id: u32,
        shape: &StepShape,
        lr: f64,
    ) -> Self {
        assert!(
            group.len() <= shape.micro,
            "more micro-batches than the shape"
        );
        let (mut labels, mut tokens) = (0, 0);
        let micro = (0..shape.micro)
            .map(|i| {
                let idx = group.get(i).map_or(&[][..], Vec::as_slice);
                let ex: Vec<&TrainExample> = idx.iter().map(|&i| &examples[i]).collect();
                let batch = Batch::new(&ex, pad_id, None);
                labels += batch.labels();
                tokens += batch.tokens;
                micro_data(&batch, pad_id, shape)
            })
            .collect();
        Self {
            micro,
            scale: (1.0 / labels.max(1) as f64) as f32,
            lr: lr as f32,
            labels,
            tokens,
        }
    }
}

/// `batch` (padded to its own longest row) moved into `shape`: rows padded to `shape.len` and
/// rows of padding added; label slots filled to `shape.labels` with weight-0 picks of rows no
/// label uses (distinct, as [`inverse_rows`] needs; a micro-batch has more slots than labels).
fn micro_data(batch: &Batch, pad_id: u32, shape: &StepShape) -> MicroData {
    let t = batch.ids.first().map_or(0, Vec::len);
    assert!(
        batch.ids.len() <= shape.rows && t <= shape.len && batch.labels() <= shape.labels,
        "a micro-batch larger than the run's step shape"
    );
    let mut ids = vec![pad_id as f32; shape.slots()];
    for (r, row) in batch.ids.iter().enumerate() {
        for (s, &id) in row.iter().enumerate() {
            ids[r * shape.len + s] = id as f32;
        }
    }
    let mut at: Vec<i64> = batch
        .predict_at
        .iter()
        .map(|&i| {
            let (r, s) = (i as usize / t, i as usize % t);
            (r * shape.len + s) as i64
        })
        .collect();
    let mut targets: Vec<f32> = batch.targets.iter().map(|&t| t as f32).collect();
    let mut weights = vec![1.0; at.len()];
    let mut used = vec![false; shape.slots()];
    for &i in &at {
        used[i as usize] = true;
    }
    let mut free = (0..shape.slots()).filter(|&i| !used[i]);
    while at.len() < shape.labels {
        at.push(free.next().expect("more slots than labels") as i64);
        targets.push(0.0);
        weights.push(0.0);
    }
    let inverse = inverse_rows(&at, shape.slots())
        .into_iter()
        .map(|i| i as f32)
        .collect();
    MicroData {
        ids,
        at: at.into_iter().map(|i| i as f32).collect(),
        inverse,
        targets,
        weights,
    }
}

/// A captured run's step inputs on the device: one buffer that stays in place and is overwritten
/// with each step's [`StepData`] ([`StepSlots::write`]), and the tables every step shares (the
/// rotary tables and causal mask of rows of `shape.len`).
#[derive(Debug, Clone)]
pub struct StepSlots {
    shape: StepShape,
    /// [`StepData::values`], f32, not tracked by autodiff.
    values: Tensor<1>,
    cos: Tensor<4>,
    sin: Tensor<4>,
    mask: Tensor<4, Bool>,
}

/// `values` as an f32 tensor on `device`.
fn upload(values: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(
        TensorData::new(values.to_vec(), [values.len()]),
        (device, DType::F32),
    )
}

impl StepSlots {
    /// The buffers of `shape` for `model`, holding `first` (the run's first step to take).
    pub fn new(model: &Llama, shape: StepShape, first: &StepData) -> Self {
        let device = model.device();
        let positions: Vec<Vec<usize>> =
            (0..shape.rows).map(|_| (0..shape.len).collect()).collect();
        let (cos, sin) = model.rotary.tables(&positions, &device);
        Self {
            shape,
            values: upload(&first.values(), &device.clone().inner()),
            cos,
            sin,
            mask: causal_mask(shape.rows, shape.len, &device),
        }
    }

    /// Writes `data` into the buffer, in place ([`assign`]): a replay that follows reads it.
    pub fn write(&mut self, data: &StepData) {
        let device = self.values.device();
        self.values = assign(self.values.clone(), upload(&data.values(), &device));
    }

    /// The shape the buffers hold.
    pub fn shape(&self) -> StepShape {
        self.shape
    }

    /// `len` values of the buffer from `start`.
    fn part(&self, start: usize, len: usize) -> Tensor<1> {
        self.values.clone().slice(s![start..start + len])
    }

    /// The learning rate (`[1]`).
    pub fn lr(&self) -> Tensor<1> {
        self.part(self.shape.micro * self.shape.micro_values() + 1, 1)
    }

    /// The micro-batches as the step reads them: the buffer's parts, cast to integers where they
    /// index.
    pub fn inputs(&self) -> Vec<BatchInputs> {
        let s = self.shape;
        let (n, l) = (s.slots(), s.labels);
        let int = |t: Tensor<1>| -> Tensor<1, Int> { t.int().autodiff() };
        let scale = self.part(s.micro * s.micro_values(), 1);
        (0..s.micro)
            .map(|m| {
                let o = m * s.micro_values();
                BatchInputs::on_device(
                    int(self.part(o, n)).reshape([s.rows, s.len]),
                    (self.cos.clone(), self.sin.clone(), self.mask.clone()),
                    (int(self.part(o + n, l)), int(self.part(o + n + l, n))),
                    int(self.part(o + 2 * n + l, l)).reshape([l, 1]),
                    Some((self.part(o + 2 * n + 2 * l, l), scale.clone())),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::tests::ex;

    /// A short last step fills the shape with padding rows, a padding micro-batch and weight-0
    /// label slots on rows no label uses; the real labels keep their tokens, moved to the
    /// shape's row length.
    #[test]
    fn a_short_step_is_filled_with_what_contributes_nothing() {
        let examples = [ex(&[1, 2, 3, 4, 5], 3), ex(&[6, 7, 8], 1), ex(&[9, 10], 1)];
        let cfg = TrainConfig {
            batch_size: 2,
            grad_accum: 2,
            ..TrainConfig::default()
        };
        let shape = StepShape::of_run(&examples, &cfg);
        // Longest 5; labels per example 2, 2, 1: the two largest make 4.
        assert_eq!(
            shape,
            StepShape {
                micro: 2,
                rows: 2,
                len: 5,
                labels: 4
            }
        );
        let step = StepData::lay_out(&examples, &[vec![1, 2]], 0, &shape, 1e-4);
        assert_eq!((step.labels, step.tokens), (3, 5));
        assert_eq!(step.scale, (1.0f64 / 3.0) as f32);
        let m = &step.micro[0];
        assert_eq!(m.ids, vec![6., 7., 8., 0., 0., 9., 10., 0., 0., 0.]);
        // Example 1 predicts 7, 8 at slots 0, 1; example 2 predicts 10 at row 1's slot 0 (5).
        assert_eq!(m.at[..3], [0., 1., 5.]);
        assert_eq!(m.targets[..3], [7., 8., 10.]);
        assert_eq!(m.weights, vec![1., 1., 1., 0.]);
        // The filler picks the first slot no label uses.
        assert_eq!((m.at[3], m.targets[3]), (2., 0.));
        assert_eq!(m.inverse[5], 2.0);
        assert_eq!(m.inverse[4], 4.0, "unpicked rows point past the picks");
        let filler = &step.micro[1];
        assert!(filler.ids.iter().all(|&i| i == 0.0));
        assert!(filler.weights.iter().all(|&w| w == 0.0));
        assert_eq!(filler.at, vec![0., 1., 2., 3.]);
    }
}
