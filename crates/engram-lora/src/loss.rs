//! Training batches and the masked cross-entropy: mean negative log-likelihood over the label
//! tokens (answer + end of turn) of the whole optimizer step, as transformers'
//! `LlamaForCausalLM` loss with `-100` labels. Only the hidden states that predict a label go
//! through the language-model head, which gives the same value and gradient as full logits at a
//! fraction of the vocabulary projection (picked in one autodiff node, [`engram_ops::pick_rows`]).
//! The cross-entropy itself is one autodiff node with a closed-form backward
//! ([`engram_ops::cross_entropy`]).
//!
//! A batch is laid out padded (one right-padded row per example) or packed (examples end to end
//! in rows of a fixed length, [`crate::pack`]); a packed row carries each slot's position and
//! sequence (segment), and its mask — causal inside each sequence, nothing across — is built on
//! the device from the segments ([`engram_model::mask::segment_mask`]).

use burn::tensor::activation::log_softmax;
use burn::tensor::{Bool, DType, Int, Tensor, TensorData};
use engram_model::Llama;
use engram_model::ids_tensor;
use engram_model::mask::{causal_mask, segment_mask};

use crate::examples::TrainExample;
use crate::pack::pack_rows;
use engram_ops::cross_entropy::label_nll;
use engram_ops::pick_rows::{inverse_rows, pick_rows};

/// Per-slot positions and segments of a packed batch, `[rows][len]` each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    /// Position of each slot inside its own sequence (0 for padding slots).
    pub positions: Vec<Vec<i64>>,
    /// The sequence each slot belongs to; every padding slot has a segment of its own.
    pub segments: Vec<Vec<i64>>,
}

/// A batch of token rows with the positions whose next token is a label.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Token ids, `[rows][slots]`, padded on the right with the pad id.
    pub ids: Vec<Vec<u32>>,
    /// Flat `row * slots + slot` indices of the hidden states that predict a label.
    pub predict_at: Vec<i64>,
    /// The label token predicted at each of those positions.
    pub targets: Vec<i64>,
    /// Non-padding tokens (throughput counts these).
    pub tokens: usize,
    /// `Some` for a packed batch.
    pub packing: Option<Packing>,
}

impl Batch {
    /// Pads `examples` on the right with `pad_id` (`pack: None`), or packs them into rows of
    /// `pack` slots (every example must fit one).
    pub fn new(examples: &[&TrainExample], pad_id: u32, pack: Option<usize>) -> Self {
        match pack {
            None => Self::padded(examples, pad_id),
            Some(len) => Self::packed(examples, pad_id, len),
        }
    }

    /// One row per example, as long as the longest.
    fn padded(examples: &[&TrainExample], pad_id: u32) -> Self {
        let t = examples.iter().map(|e| e.ids.len()).max().unwrap_or(0);
        let rows: Vec<Vec<usize>> = (0..examples.len()).map(|i| vec![i]).collect();
        Self::laid_out(examples, &rows, t, pad_id, false)
    }

    /// Examples end to end in rows of `len` slots.
    fn packed(examples: &[&TrainExample], pad_id: u32, len: usize) -> Self {
        let lengths: Vec<usize> = examples.iter().map(|e| e.ids.len()).collect();
        Self::laid_out(examples, &pack_rows(&lengths, len), len, pad_id, true)
    }

    /// `rows` (example indices in slot order) laid out in rows of `len` slots, with each slot's
    /// position and segment when `packed`.
    fn laid_out(
        examples: &[&TrainExample],
        rows: &[Vec<usize>],
        len: usize,
        pad: u32,
        packed: bool,
    ) -> Self {
        let mut batch = Self {
            ids: Vec::with_capacity(rows.len()),
            predict_at: Vec::new(),
            targets: Vec::new(),
            tokens: 0,
            packing: None,
        };
        let mut packing = Packing {
            positions: Vec::with_capacity(rows.len()),
            segments: Vec::with_capacity(rows.len()),
        };
        for (r, row) in rows.iter().enumerate() {
            let (mut ids, mut positions, mut segments) = (Vec::new(), Vec::new(), Vec::new());
            for (s, &i) in row.iter().enumerate() {
                let e = examples[i];
                let start = r * len + ids.len();
                for p in e.prompt_len.max(1)..e.ids.len() {
                    batch.predict_at.push((start + p - 1) as i64);
                    batch.targets.push(e.ids[p] as i64);
                }
                ids.extend_from_slice(&e.ids);
                if packed {
                    positions.extend(0..e.ids.len() as i64);
                    segments.extend(std::iter::repeat_n(s as i64, e.ids.len()));
                }
                batch.tokens += e.ids.len();
            }
            let used = ids.len();
            ids.resize(len, pad);
            batch.ids.push(ids);
            if packed {
                positions.resize(len, 0);
                segments.extend((used..len).map(|slot| (row.len() + slot) as i64));
                packing.positions.push(positions);
                packing.segments.push(segments);
            }
        }
        batch.packing = packed.then_some(packing);
        batch
    }

    /// Label tokens.
    pub fn labels(&self) -> usize {
        self.targets.len()
    }

    /// Token slots (rows × row length), padding included.
    pub fn slots(&self) -> usize {
        self.ids.len() * self.ids.first().map_or(0, Vec::len)
    }
}

/// An `Int` tensor `[rows, len]` from host rows.
fn int_rows(rows: &[Vec<i64>], device: &burn::tensor::Device) -> Tensor<2, Int> {
    let shape = [rows.len(), rows.first().map_or(0, Vec::len)];
    Tensor::from_data(TensorData::new(rows.concat(), shape), device)
}

/// A batch's device tensors — token ids, rotary tables, mask, the rows that predict a label,
/// their inverse and the targets — uploaded once, so that a step can run again on the same
/// buffers: a captured step ([`crate::graph`]) must not write host data to the device while it
/// is recorded.
#[derive(Debug, Clone)]
pub struct BatchInputs {
    ids: Tensor<2, Int>,
    cos: Tensor<4>,
    sin: Tensor<4>,
    mask: Tensor<4, Bool>,
    at: Tensor<1, Int>,
    inverse: Tensor<1, Int>,
    targets: Tensor<2, Int>,
    /// Each label slot's weight (`[n]` f32: 1, or 0 for a slot that only fills a fixed shape)
    /// and the loss's scale (`[1]`, the step's `1 / labels`), both on the device: a captured
    /// run's step ([`crate::fixed_steps`]).
    weighted: Option<(Tensor<1>, Tensor<1>)>,
}

impl BatchInputs {
    /// `batch` on `model`'s device.
    pub fn upload(model: &Llama, batch: &Batch) -> Self {
        let device = model.device();
        let b = batch.ids.len();
        let t = batch.ids.first().map_or(0, Vec::len);
        let ids = ids_tensor(&batch.ids, &device);
        let (cos, sin, mask) = match &batch.packing {
            // Right padding needs no padding mask: real tokens never attend to later (pad) slots.
            None => {
                let positions: Vec<Vec<usize>> = (0..b).map(|_| (0..t).collect()).collect();
                let (cos, sin) = model.rotary.tables(&positions, &device);
                (cos, sin, causal_mask(b, t, &device))
            }
            Some(p) => {
                let mask = segment_mask(int_rows(&p.segments, &device));
                let (cos, sin) = model
                    .rotary
                    .gather(int_rows(&p.positions, &device), t, &device);
                (cos, sin, mask)
            }
        };
        let n = batch.predict_at.len();
        let at = Tensor::from_data(TensorData::new(batch.predict_at.clone(), [n]), &device);
        let inverse = Tensor::from_data(
            TensorData::new(inverse_rows(&batch.predict_at, b * t), [b * t]),
            &device,
        );
        let targets = Tensor::from_data(TensorData::new(batch.targets.clone(), [n, 1]), &device);
        Self::on_device(ids, (cos, sin, mask), (at, inverse), targets, None)
    }

    /// A micro-batch already on the device: `ids` `[rows, len]`, the rotary tables and mask of
    /// those rows, the picked rows `at` and their [`inverse_rows`], `targets` `[n, 1]`, and,
    /// `weighted`, each label slot's weight and the loss's scale, which then replaces the
    /// division by a count ([`inputs_loss`]).
    pub(crate) fn on_device(
        ids: Tensor<2, Int>,
        (cos, sin, mask): (Tensor<4>, Tensor<4>, Tensor<4, Bool>),
        (at, inverse): (Tensor<1, Int>, Tensor<1, Int>),
        targets: Tensor<2, Int>,
        weighted: Option<(Tensor<1>, Tensor<1>)>,
    ) -> Self {
        Self {
            ids,
            cos,
            sin,
            mask,
            at,
            inverse,
            targets,
            weighted,
        }
    }
}

/// Summed negative log-likelihood of the batch's labels divided by `normalizer` (the label count
/// of the whole optimizer step), a 1-element tensor on the model's device.
pub fn batch_loss(model: &Llama, batch: &Batch, normalizer: f64) -> Tensor<1> {
    inputs_loss(model, &BatchInputs::upload(model, batch), normalizer)
}

/// [`batch_loss`] of a batch already on the device: no host data travels. A weighted batch
/// ([`crate::fixed_steps`]) ignores `normalizer`: its loss is `−Σᵢ wᵢ log pᵢ[tᵢ] · scale`, through
/// Burn's composed `log_softmax` and `gather` (autodiff's gradient: a weight-0 slot's is 0), as
/// the fused [`label_nll`] takes no weights.
pub fn inputs_loss(model: &Llama, inputs: &BatchInputs, normalizer: f64) -> Tensor<1> {
    let hidden = model.forward_rows_at(
        inputs.ids.clone(),
        &inputs.cos,
        &inputs.sin,
        Some(&inputs.mask),
        None,
    );
    let h = hidden.dims()[1];
    let n = inputs.at.dims()[0];
    let picked = pick_rows(hidden, inputs.at.clone(), inputs.inverse.clone()).reshape([1, n, h]);
    let logits = model.logits(picked).reshape([n, model.config.vocab_size]);
    match &inputs.weighted {
        None => label_nll(logits, inputs.targets.clone(), normalizer),
        Some((weights, scale)) => {
            let logp = log_softmax(logits.cast(DType::F32), 1);
            let picked = logp.gather(1, inputs.targets.clone()).reshape([n]);
            (picked * weights.clone()).sum().neg() * scale.clone()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A training example of `ids` whose first `prompt_len` are the prompt.
    pub(crate) fn ex(ids: &[u32], prompt_len: usize) -> TrainExample {
        TrainExample {
            id: String::new(),
            ids: ids.to_vec(),
            prompt_len,
        }
    }

    #[test]
    fn packed_rows_keep_each_example_with_its_positions_and_labels() {
        let (a, b, c) = (ex(&[1, 2, 3, 4], 2), ex(&[5, 6, 7], 1), ex(&[8, 9], 1));
        let padded = Batch::new(&[&a, &b, &c], 0, None);
        assert_eq!(padded.slots(), 12);
        assert_eq!(padded.predict_at, vec![1, 2, 4, 5, 8]);
        assert!(padded.packing.is_none());
        let packed = Batch::new(&[&a, &b, &c], 0, Some(6));
        // Longest first: a (4) then c (2) fill row 0; b (3) opens row 1.
        assert_eq!(
            packed.ids,
            vec![vec![1, 2, 3, 4, 8, 9], vec![5, 6, 7, 0, 0, 0]]
        );
        let p = packed.packing.as_ref().unwrap();
        assert_eq!(
            p.positions,
            vec![vec![0, 1, 2, 3, 0, 1], vec![0, 1, 2, 0, 0, 0]]
        );
        assert_eq!(
            p.segments,
            vec![vec![0, 0, 0, 0, 1, 1], vec![0, 0, 0, 4, 5, 6]]
        );
        // a's labels 3, 4 predicted at slots 1, 2; c's 9 at slot 4; b's 6, 7 at row 1's 0, 1.
        assert_eq!(packed.predict_at, vec![1, 2, 4, 6, 7]);
        assert_eq!(packed.targets, vec![3, 4, 9, 6, 7]);
        assert_eq!((packed.tokens, packed.labels()), (9, padded.labels()));
    }
}
