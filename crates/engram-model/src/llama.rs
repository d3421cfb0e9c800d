//! The Llama-family causal language model (transformers' `LlamaForCausalLM`).

use burn::module::{Module, Param};
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use crate::block::DecoderLayer;
use crate::config::LlamaConfig;
use crate::kv_cache::KvCache;
use crate::linear::Linear;
use crate::lora::dropout::{PoolScope, pool_scope};
use crate::mask::{attention_mask, attention_mask_from};
use crate::norm::RmsNorm;
use crate::rope::Rotary;

/// Embeddings, decoder blocks, final norm and the language-model head.
#[derive(Module, Debug)]
pub struct Llama {
    /// `model.embed_tokens.weight`, `[vocab, hidden]`.
    pub embed_tokens: Param<Tensor<2>>,
    /// `model.layers`.
    pub layers: Vec<DecoderLayer>,
    /// `model.norm`.
    pub norm: RmsNorm,
    /// `lm_head`; `None` when tied to the embeddings.
    pub lm_head: Option<Linear>,
    /// Hyper-parameters.
    #[module(skip)]
    pub config: LlamaConfig,
    /// Rotary frequencies.
    #[module(skip)]
    pub rotary: Rotary,
    /// The tied embedding as stored in quantized blocks, for the CPU kernel's language-model
    /// head (see [`crate::linear::Linear::quantized`]).
    #[module(skip)]
    pub embed_quantized: Option<std::sync::Arc<engram_kernels::QuantizedMatrix>>,
}

/// Tokens per prefill chunk in [`Llama::prefill`].
pub const PREFILL_CHUNK: usize = 512;

/// Token ids of a batch as an `Int` tensor `[batch, seq]`.
pub fn ids_tensor(rows: &[Vec<u32>], device: &Device) -> Tensor<2, Int> {
    let b = rows.len();
    let t = rows.first().map_or(0, Vec::len);
    let flat: Vec<i64> = rows.iter().flatten().map(|&x| x as i64).collect();
    Tensor::from_data(TensorData::new(flat, [b, t]), device)
}

impl Llama {
    /// The model as inference should run it: itself on a plain device, its validation copy
    /// (no autodiff graph, no dropout) on an autodiff device.
    pub fn for_inference(&self) -> std::borrow::Cow<'_, Llama> {
        if self.device().is_autodiff() {
            std::borrow::Cow::Owned(self.valid())
        } else {
            std::borrow::Cow::Borrowed(self)
        }
    }

    /// Forgets the quantized copies kept for the CPU kernel (which then reads the f32 weights);
    /// returns how many there were.
    pub fn drop_quantized_weights(&mut self) -> usize {
        let mut dropped = usize::from(self.embed_quantized.take().is_some());
        for layer in 0..self.layers.len() {
            for t in crate::lora::LoraTarget::ALL {
                dropped += usize::from(self.linear_mut(layer, t).quantized.take().is_some());
            }
        }
        if let Some(head) = &mut self.lm_head {
            dropped += usize::from(head.quantized.take().is_some());
        }
        dropped
    }

    /// Whether any weight is kept in quantized blocks for the CPU kernel.
    pub fn has_quantized_blocks(&self) -> bool {
        self.embed_quantized.is_some()
            || self.lm_head.as_ref().is_some_and(|h| h.quantized.is_some())
            || (0..self.layers.len()).any(|layer| {
                crate::lora::LoraTarget::ALL
                    .iter()
                    .any(|&t| self.linear(layer, t).quantized.is_some())
            })
    }

    /// The device the weights live on.
    pub fn device(&self) -> Device {
        self.embed_tokens.val().device()
    }

    /// Hidden states after the final norm, `[batch, seq, hidden]`, for token ids `[batch, seq]` at
    /// absolute `positions[b][t]`, with an optional mask (true = masked) and KV cache.
    pub fn forward_hidden(
        &self,
        tokens: Tensor<2, Int>,
        positions: &[Vec<usize>],
        mask: Option<&Tensor<4, Bool>>,
        cache: Option<&mut KvCache>,
    ) -> Tensor<3> {
        let (cos, sin) = self.rotary.tables(positions, &tokens.device());
        self.forward_hidden_at(tokens, &cos, &sin, mask, cache)
    }

    /// As [`Llama::forward_hidden`], with the rotary tables given (`[batch or 1, seq, 1,
    /// head_dim]`, `sin` signed: [`crate::rope`]; e.g. from [`Rotary::gather`]).
    pub fn forward_hidden_at(
        &self,
        tokens: Tensor<2, Int>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: Option<&Tensor<4, Bool>>,
        cache: Option<&mut KvCache>,
    ) -> Tensor<3> {
        let [b, t] = tokens.dims();
        let rows = self.forward_rows_at(tokens, cos, sin, mask, cache);
        let h = rows.dims()[1];
        rows.reshape([b, t, h])
    }

    /// As [`Llama::forward_hidden_at`], the hidden states as rows, `[batch · seq, hidden]` (row
    /// `b · seq + t`). The blocks run on `[1, batch · seq, hidden]` (attention alone splits the
    /// rows into sequences): a projection of rows is one matmul whose weight gradient (an
    /// adapter's) is one product over all the tokens, where `[batch, seq, hidden]` would run a
    /// batched matmul against the broadcast weight, whose backward makes one gradient per
    /// sequence and sums them (a `[batch, in, out]` temporary and a reduction per adapter
    /// factor). The leading 1 keeps the rank Burn's fusion saw before: a reshape that lowers
    /// the rank ends a fused block.
    pub fn forward_rows_at(
        &self,
        tokens: Tensor<2, Int>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: Option<&Tensor<4, Bool>>,
        mut cache: Option<&mut KvCache>,
    ) -> Tensor<2> {
        let [b, t] = tokens.dims();
        let hidden = self.config.hidden_size;
        let _pool = self.dropout_pool(b * t, &tokens.device());
        let x = burn::tensor::module::embedding(self.embed_tokens.val(), tokens);
        let mut x = x.reshape([1, b * t, hidden]);
        for (i, layer) in self.layers.iter().enumerate() {
            let layer_cache = cache.as_deref_mut().map(|c| &mut c.layers[i]);
            x = layer.forward(x, b, cos, sin, mask, layer_cache);
        }
        self.norm.forward(x).reshape([b * t, hidden])
    }

    /// Every dropout mask of a training forward over `tokens` rows drawn at once
    /// ([`crate::lora::dropout`]), where all sites share one probability; `None` otherwise.
    fn dropout_pool(&self, tokens: usize, device: &Device) -> Option<PoolScope> {
        pool_scope(device, || {
            self.layers
                .iter()
                .flat_map(|l| {
                    let mut s = l.self_attn.dropout_sites(tokens);
                    s.extend(l.mlp.dropout_sites(tokens));
                    s
                })
                .collect()
        })
    }

    /// Logits for hidden states `[batch, seq, hidden]` -> `[batch, seq, vocab]` (computed in the
    /// model's dtype, as transformers does).
    pub fn logits(&self, hidden: Tensor<3>) -> Tensor<3> {
        match &self.lm_head {
            Some(head) => head.forward(hidden),
            None => {
                // Tied head: logitsᵀ = E · hᵀ keeps the [vocab, hidden] embedding contiguous as
                // the left operand instead of materializing its transpose on every call.
                let embed = self.embed_tokens.val();
                let fast = match &self.embed_quantized {
                    Some(q) => crate::cpu_matmul::matmul_nt_quantized(&hidden, q),
                    None => crate::cpu_matmul::matmul_nt(&hidden, &embed),
                };
                if let Some(logits) = fast {
                    return logits;
                }
                let [b, t, h] = hidden.dims();
                let flat = hidden.reshape([b * t, h]);
                let out = embed.matmul(flat.transpose());
                out.transpose().reshape([b, t, self.config.vocab_size])
            }
        }
    }

    /// Logits of every position for unpadded sequences of equal length (positions 0..T).
    pub fn forward(&self, rows: &[Vec<u32>]) -> Tensor<3> {
        let device = self.device();
        let t = rows.first().map_or(0, Vec::len);
        let positions: Vec<Vec<usize>> = rows.iter().map(|_| (0..t).collect()).collect();
        let mask = attention_mask(&vec![0; rows.len()], 0, t, &device);
        let hidden =
            self.forward_hidden(ids_tensor(rows, &device), &positions, mask.as_ref(), None);
        self.logits(hidden)
    }

    /// Runs `rows` through the model, appending to `cache` (whose `pads`/`pad_start` say which
    /// slots are padding), and returns the hidden state of the last slot of each row,
    /// `[batch, hidden]`.
    pub fn step(&self, rows: &[Vec<u32>], cache: &mut KvCache) -> Tensor<2> {
        let device = self.device();
        let t = rows.first().map_or(0, Vec::len);
        let start = cache.len;
        let ps = cache.pad_start;
        let positions: Vec<Vec<usize>> = cache
            .pads
            .iter()
            .map(|&p| {
                (start..start + t)
                    .map(|s| if s < ps { s } else { s.saturating_sub(p) })
                    .collect()
            })
            .collect();
        let mask = attention_mask_from(&cache.pads, ps, start, t, &device);
        let hidden = self.forward_hidden(
            ids_tensor(rows, &device),
            &positions,
            mask.as_ref(),
            Some(cache),
        );
        cache.len += t;
        let [b, _, h] = hidden.dims();
        hidden.narrow(1, t - 1, 1).reshape([b, h])
    }

    /// [`Llama::step`] over equal-length (padded) `rows` in chunks of [`PREFILL_CHUNK`] slots, so
    /// that attention stays `chunk × length` rather than `length²` for long prompts (an 8k-token
    /// prompt would otherwise need gigabytes per layer on the eager path). Returns the hidden
    /// state of each row's last slot; `rows` must not be empty.
    pub fn step_chunked(&self, rows: &[Vec<u32>], cache: &mut KvCache) -> Tensor<2> {
        let t = rows[0].len();
        let mut start = 0;
        loop {
            let end = (start + PREFILL_CHUNK).min(t);
            let chunk: Vec<Vec<u32>> = rows.iter().map(|r| r[start..end].to_vec()).collect();
            let hidden = self.step(&chunk, cache);
            if end == t {
                return hidden;
            }
            start = end;
        }
    }

    /// The cache of one unpadded prompt (e.g. a prefix shared by many questions), prefilled with
    /// [`Llama::step_chunked`].
    pub fn prefill(&self, prompt: &[u32]) -> KvCache {
        let mut cache = self.new_cache(vec![0]);
        if !prompt.is_empty() {
            self.step_chunked(&[prompt.to_vec()], &mut cache);
        }
        cache
    }

    /// A fresh cache for a batch with the given left padding.
    pub fn new_cache(&self, pads: Vec<usize>) -> KvCache {
        KvCache::new(self.layers.len(), pads)
    }
}
