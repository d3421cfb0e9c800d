//! Padded training batches and the masked cross-entropy: mean negative log-likelihood over the
//! label tokens (answer + end of turn) of the whole optimizer step, as transformers'
//! `LlamaForCausalLM` loss with `-100` labels. Only the hidden states that predict a label go
//! through the language-model head, which gives the same value and gradient as full logits at a
//! fraction of the vocabulary projection.

use burn::tensor::activation::log_softmax;
use burn::tensor::{DType, Int, Tensor, TensorData};
use engram_model::Llama;
use engram_model::llama::ids_tensor;
use engram_model::mask::attention_mask;

use crate::examples::TrainExample;

/// A right-padded batch with the positions whose next token is a label.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Token ids, `[batch][seq]`, right-padded.
    pub ids: Vec<Vec<u32>>,
    /// Flat `b * seq + t` indices of the hidden states that predict a label.
    pub predict_at: Vec<i64>,
    /// The label token predicted at each of those positions.
    pub targets: Vec<i64>,
    /// Non-padding tokens (throughput counts these).
    pub tokens: usize,
}

impl Batch {
    /// Pads `examples` on the right with `pad_id`.
    pub fn new(examples: &[&TrainExample], pad_id: u32) -> Self {
        let t = examples.iter().map(|e| e.ids.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(examples.len());
        let mut predict_at = Vec::new();
        let mut targets = Vec::new();
        let mut tokens = 0;
        for (b, e) in examples.iter().enumerate() {
            let mut row = e.ids.clone();
            tokens += row.len();
            row.resize(t, pad_id);
            for p in e.prompt_len.max(1)..e.ids.len() {
                predict_at.push((b * t + p - 1) as i64);
                targets.push(e.ids[p] as i64);
            }
            ids.push(row);
        }
        Self {
            ids,
            predict_at,
            targets,
            tokens,
        }
    }

    /// Label tokens.
    pub fn labels(&self) -> usize {
        self.targets.len()
    }
}

/// Summed negative log-likelihood of the batch's labels divided by `normalizer` (the label count
/// of the whole optimizer step), a 1-element tensor on the model's device.
pub fn batch_loss(model: &Llama, batch: &Batch, normalizer: f64) -> Tensor<1> {
    let device = model.device();
    let b = batch.ids.len();
    let t = batch.ids.first().map_or(0, Vec::len);
    // Right padding needs no padding mask: real tokens never attend to later (pad) slots.
    let positions: Vec<Vec<usize>> = (0..b).map(|_| (0..t).collect()).collect();
    let mask = attention_mask(&vec![0; b], 0, t, &device);
    let hidden = model.forward_hidden(
        ids_tensor(&batch.ids, &device),
        &positions,
        mask.as_ref(),
        None,
    );
    let h = hidden.dims()[2];
    let n = batch.predict_at.len();
    let at: Tensor<1, Int> =
        Tensor::from_data(TensorData::new(batch.predict_at.clone(), [n]), &device);
    let picked = hidden.reshape([b * t, h]).select(0, at).reshape([1, n, h]);
    let logits = model.logits(picked).reshape([n, model.config.vocab_size]);
    let logp = log_softmax(logits.cast(DType::F32), 1);
    let targets: Tensor<2, Int> =
        Tensor::from_data(TensorData::new(batch.targets.clone(), [n, 1]), &device);
    let nll = logp.gather(1, targets).sum().neg();
    nll.div_scalar(normalizer)
}
