//! Multi-head self-attention with grouped-query key/value heads, rotate-half RoPE and an
//! optional KV cache. Numerics as transformers' eager path: scores scaled by `head_dim^-0.5`,
//! masked, softmax in f32, cast back.
//!
//! Inference on the CPU backend (`flex`, no autodiff) runs Burn's fused attention op instead:
//! flex tiles it over the keys with an online softmax in f32 (flash attention), reads grouped
//! key/value heads and a `[batch, 1, q, k]` mask without expanding them, and never materializes
//! the `q × k` scores — a long prompt no longer allocates gigabytes per layer. It is the same
//! function up to float rounding (tests compare it with transformers and with the eager path).
//! Other backends document neither grouped heads nor broadcast masks for that op, so they keep
//! the eager path. With a KV cache, the CPU backend keeps keys and values in a host buffer
//! written in place ([`engram_kernels::KvBuffer`]) and a decode step attends over it with
//! engram's kernel, where a cache of tensors would be concatenated (copied whole) every step.

use burn::module::Module;
use burn::tensor::activation::softmax;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, DType, Device, Tensor, TensorData};

use crate::attention_op::attention_core;
use crate::kv_cache::LayerCache;
use crate::linear::{Linear, dropout_sites, shared_adapter_input};
use crate::rope::apply_rotary;
use crate::rope_op::rotary_heads_first;

/// Llama self-attention.
#[derive(Module, Debug)]
pub struct Attention {
    /// `q_proj`.
    pub q_proj: Linear,
    /// `k_proj`.
    pub k_proj: Linear,
    /// `v_proj`.
    pub v_proj: Linear,
    /// `o_proj`.
    pub o_proj: Linear,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Per-head width.
    pub head_dim: usize,
}

impl Attention {
    /// The dropout masks [`Attention::forward`] on `tokens` rows draws, `(probability,
    /// elements)`.
    pub fn dropout_sites(&self, tokens: usize) -> Vec<(f64, usize)> {
        let mut sites = dropout_sites(&[&self.q_proj, &self.k_proj, &self.v_proj], tokens);
        sites.extend(dropout_sites(&[&self.o_proj], tokens));
        sites
    }

    /// `x: [1, batch · seq, hidden]`, the token rows of `batch` sequences ([`crate::Llama`]'s
    /// blocks run on rows); `cos`/`sin: [batch or 1, seq, 1, head_dim]` ([`crate::rope`]'s
    /// tables, `sin` signed); `mask: [batch, 1,
    /// seq, keys]` (true = masked). With a cache, the new keys/values are appended and attention
    /// runs over everything cached. Returns `[1, batch · seq, hidden]`.
    pub fn forward(
        &self,
        x: Tensor<3>,
        batch: usize,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: Option<&Tensor<4, Bool>>,
        cache: Option<&mut LayerCache>,
    ) -> Tensor<3> {
        let (b, t) = (batch, x.dims()[1] / batch);
        let (h, kv, d) = (self.n_heads, self.n_kv_heads, self.head_dim);
        // q, k and v's adapters share one prepared input (cast, dropout mask).
        let xa = shared_adapter_input(&[&self.q_proj, &self.k_proj, &self.v_proj], &x);
        let q = self.q_proj.forward_prepared(x.clone(), xa.clone());
        let k = self.k_proj.forward_prepared(x.clone(), xa.clone());
        let v = self.v_proj.forward_prepared(x, xa);
        let (q, k, v) = (
            q.reshape([b, t, h, d]),
            k.reshape([b, t, kv, d]),
            v.reshape([b, t, kv, d]),
        );
        let scale = (d as f64).powf(-0.5);
        if fused_attention(&q.device()) {
            // RoPE on q and k as the projections lay them out ([b, t, heads, d]).
            let q = apply_rotary(q, cos, sin);
            let k = apply_rotary(k, cos, sin);
            let out = match cache {
                Some(c) => cached_on_host(c, q, k, v, mask, scale),
                None => fused(q, k.swap_dims(1, 2), v.swap_dims(1, 2), mask, scale),
            };
            return self.o_proj.forward(out);
        }
        // Heads first: RoPE writes q and k in that layout.
        let q = rotary_heads_first(q, cos, sin);
        let k = rotary_heads_first(k, cos, sin);
        let v = v.swap_dims(1, 2);
        let (k, v) = match cache {
            Some(c) => c.append(k, v),
            None => (k, v),
        };
        // Grouped-query attention without repeating keys/values: query heads sharing a kv head
        // (HF's repeat_kv maps head i to kv head i / groups) are stacked along the sequence
        // axis, so each kv head is read once: [b, kv, groups * t, d] x [b, kv, d, s].
        let q = q.reshape([b, kv, (h / kv) * t, d]);
        let out = match mask {
            // One autodiff node with a closed-form backward (same forward ops).
            Some(m) => attention_core(q, k, v, m.clone(), h, scale),
            None => attention_eager(q, k, v, None, h, scale),
        };
        let out = out
            .reshape([b, h, t, d])
            .swap_dims(1, 2)
            .reshape([1, b * t, h * d]);
        self.o_proj.forward(out)
    }
}

/// Eager grouped attention in Burn ops, differentiated op by op: `q: [b, kv, groups · t, d]`,
/// `k`, `v: [b, kv, s, d]`, `mask: [b, 1, t, s]` (true = masked), `heads = kv · groups`;
/// returns `[b, kv, groups · t, d]`. Scores and softmax in f32, probabilities cast back to the
/// input dtype, as transformers' eager path. With a mask, [`attention_core`] runs these ops as
/// one autodiff node.
pub(crate) fn attention_eager(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: Option<Tensor<4, Bool>>,
    heads: usize,
    scale: f64,
) -> Tensor<4> {
    let [b, kv, gt, _] = q.dims();
    let (t, s) = (gt * kv / heads, k.dims()[2]);
    let dtype = q.dtype();
    let scores = q
        .matmul(k.swap_dims(2, 3))
        .mul_scalar(scale)
        .cast(DType::F32)
        .reshape([b, heads, t, s]);
    let scores = match mask {
        Some(m) => scores.mask_fill(m, f32::MIN),
        None => scores,
    };
    let probs = softmax(scores, 3).cast(dtype).reshape([b, kv, gt, s]);
    probs.matmul(v)
}

/// Query slots up to which a cached step attends through [`engram_kernels::KvBuffer::attend`] (a decode step;
/// longer prompt chunks run Burn's fused op over a contiguous copy of the cache).
const HOST_ATTENTION_MAX_QUERIES: usize = 16;

/// Burn's fused attention of `q: [b, t, h, d]` over `k`, `v: [b, kv, s, d]` (heads first),
/// `[1, b · t, h·d]`.
fn fused(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: Option<&Tensor<4, Bool>>,
    scale: f64,
) -> Tensor<3> {
    let [b, t, h, d] = q.dims();
    let options = AttentionModuleOptions {
        scale: Some(scale),
        softcap: None,
        is_causal: false,
    };
    burn::tensor::module::attention(q.swap_dims(1, 2), k, v, mask.cloned(), None, options)
        .swap_dims(1, 2)
        .reshape([1, b * t, h * d])
}

/// A tensor's values as f32 on the host.
fn host(t: Tensor<4>) -> Vec<f32> {
    t.into_data()
        .try_into_vec_as::<f32>()
        .expect("an activation converts to f32")
}

/// The CPU backend's cached step: `k`, `v` (`[b, t, kv, d]`) written into the layer's host
/// buffer, then `q` (`[b, t, h, d]`) attended over it — by [`engram_kernels::KvBuffer::attend`] for a decode
/// step, by Burn's fused op for a long chunk. Returns `[1, b · t, h·d]` in `q`'s dtype.
fn cached_on_host(
    cache: &mut LayerCache,
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: Option<&Tensor<4, Bool>>,
    scale: f64,
) -> Tensor<3> {
    let [b, t, h, d] = q.dims();
    let kv = k.dims()[2];
    let device = q.device();
    let dtype = q.dtype();
    let buffer = cache.host_buffer(b, kv, d);
    let first = buffer.is_empty();
    buffer.append(&host(k.clone()), &host(v.clone()), t);
    if t <= HOST_ATTENTION_MAX_QUERIES {
        let mask = mask.map(|m| {
            m.clone()
                .into_data()
                .try_into_vec_as::<bool>()
                .expect("a mask converts to bool")
        });
        let out = buffer.attend(&host(q), t, h, mask.as_deref(), scale as f32);
        return Tensor::<3>::from_data(TensorData::new(out, [1, b * t, h * d]), &device)
            .cast(dtype);
    }
    // A long chunk: the fused op over the new keys alone when nothing came before, else over a
    // contiguous copy of the buffer (once per chunk of many queries).
    let (k, v) = if first {
        (k.swap_dims(1, 2), v.swap_dims(1, 2))
    } else {
        let s = buffer.len();
        let (kc, vc) = buffer.contiguous();
        let tensor =
            |x| Tensor::<4>::from_data(TensorData::new(x, [b, kv, s, d]), &device).cast(dtype);
        (tensor(kc), tensor(vc))
    };
    fused(q, k, v, mask, scale)
}

/// Whether attention on `device` runs the backend's fused op (the CPU backend without autodiff;
/// see the module docs).
pub fn fused_attention(device: &Device) -> bool {
    !device.is_autodiff() && *device == Device::flex()
}
