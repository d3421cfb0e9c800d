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
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Device, Tensor, TensorData, s};
use engram_ops::attention::{
    attention_core, attention_eager, attention_rope, attention_rope_joined,
};
use engram_ops::rope::rotary_heads_first;

use crate::kv_cache::LayerCache;
use crate::linear::{Joined, Linear, dropout_sites, join, shared_adapter_input};
use crate::norm::RmsNorm;
use crate::rope::apply_rotary;

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
    /// Qwen3's RMSNorm over each head of q (`q_norm`, `[head_dim]`), before RoPE.
    pub q_norm: Option<RmsNorm>,
    /// The same for k (`k_norm`).
    pub k_norm: Option<RmsNorm>,
    /// q, k and v's frozen weights side by side, `[hidden, (heads + 2 · kv) · head_dim]` (and
    /// their biases, where they have them), on the GPU backends
    /// ([`Attention::join_projections`]): one product where three ran, each projection's weight
    /// a view of its part. `None` elsewhere; whatever changes a projection's weight drops it.
    pub qkv: Option<Joined>,
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
        let (h, d) = (self.n_heads, self.head_dim);
        let scale = (d as f64).powf(-0.5);
        let projected = self.project(x, b, t);
        // Qwen3: each head of q and k normalized before RoPE (q, k and v then go on apart).
        let projected = match (&self.q_norm, &self.k_norm) {
            (Some(qn), Some(kn)) => {
                let [q, k, v] = projected.separate();
                Projected::Separate([qn.forward(q), kn.forward(k), v])
            }
            _ => projected,
        };
        if fused_attention(&projected.device()) {
            let [q, k, v] = projected.separate();
            // RoPE on q and k as the projections lay them out ([b, t, heads, d]).
            let q = apply_rotary(q, cos, sin);
            let k = apply_rotary(k, cos, sin);
            let out = match cache {
                Some(c) => cached_on_host(c, q, k, v, mask, scale),
                None => fused(q, k.swap_dims(1, 2), v.swap_dims(1, 2), mask, scale),
            };
            return self.o_proj.forward(out);
        }
        let out = match (cache, mask, projected) {
            // One autodiff node from the projections to the output (their sums, RoPE, layout,
            // the core); on the GPU backends one kernel lays out q, k and v each way, and the
            // backward's also writes the joined product's gradient.
            (
                None,
                Some(m),
                Projected::Joined {
                    base,
                    deltas: Some(deltas),
                    ..
                },
            ) => {
                let ([q, k, v], delta_scale) = deltas;
                let m = m.clone();
                attention_rope_joined(base, q, k, v, cos, sin, m, h, scale, delta_scale)
            }
            (None, Some(m), p) => {
                let [q, k, v] = p.separate();
                attention_rope(q, k, v, cos, sin, m.clone(), h, scale)
            }
            (cache, mask, p) => {
                let [q, k, v] = p.separate();
                self.eager(q, k, v, cos, sin, mask, cache, scale)
            }
        };
        let out = out
            .reshape([b, h, t, d])
            .swap_dims(1, 2)
            .reshape([1, b * t, h * d]);
        self.o_proj.forward(out)
    }

    /// q, k and v of `x: [1, b · t, hidden]`, `[b, t, heads, d]` each: by one product with the
    /// joined weight where there is one, else by each projection.
    fn project(&self, x: Tensor<3>, b: usize, t: usize) -> Projected {
        let (h, kv, d) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let linears = [&self.q_proj, &self.k_proj, &self.v_proj];
        // q, k and v's adapters share one prepared input (cast, dropout mask).
        let xa = shared_adapter_input(&linears, &x);
        let heads = [h, kv, kv];
        if let Some(w) = &self.qkv {
            let adapters = linears.map(|l| l.lora.as_ref());
            let adapted = adapters.iter().filter(|a| a.is_some()).count();
            if adapted > 0 && adapted < 3 {
                // Adapters on some of q, k and v only (PEFT's default for Llama targets q and
                // v): the joined product's parts, each plus its own adapter's delta.
                let base = w.forward(x.clone());
                let (mut from, mut n) = (0, heads.iter());
                return Projected::Separate(linears.map(|l| {
                    let part = base.clone().slice(s![.., .., from..from + l.d_out()]);
                    from += l.d_out();
                    let part = match &l.lora {
                        Some(a) => {
                            let xp = xa.clone().unwrap_or_else(|| a.prepare(x.clone()));
                            a.add_to(part, xp)
                        }
                        None => part,
                    };
                    part.reshape([b, t, *n.next().expect("three"), d])
                }));
            }
            let deltas = match (adapters, &xa) {
                // The adapters' products, which the joined op scales (and casts).
                ([Some(aq), Some(ak), Some(av)], Some(xa))
                    if ak.scaling == aq.scaling && av.scaling == aq.scaling =>
                {
                    Some(([aq, ak, av].map(|a| a.product(xa.clone())), aq.scaling))
                }
                // Each adapter's product times its own scale (in its compute dtype: the joined
                // op adds it in PEFT's order).
                ([Some(aq), Some(ak), Some(av)], _) => {
                    let deltas = [aq, ak, av].map(|a| {
                        let xp = xa.clone().unwrap_or_else(|| a.prepare(x.clone()));
                        a.product(xp).mul_scalar(a.scaling)
                    });
                    Some((deltas, 1.0))
                }
                _ => None,
            };
            let base = w.forward(x);
            let mut n = heads.iter();
            return Projected::Joined {
                base: base.reshape([b, t, h + 2 * kv, d]),
                heads,
                deltas: deltas.map(|(ds, scale)| {
                    let ds = ds.map(|y| y.reshape([b, t, *n.next().expect("three"), d]));
                    (ds, scale)
                }),
            };
        }
        let mut n = heads.iter();
        Projected::Separate(linears.map(|l| {
            l.forward_prepared(x.clone(), xa.clone())
                .reshape([b, t, *n.next().expect("three"), d])
        }))
    }

    /// Joins q, k and v's weights ([`Attention::qkv`]) where each projection has a plain float
    /// weight (no quantized blocks) in one dtype, and their biases where all three have one; a
    /// no-op elsewhere.
    pub fn join_projections(&mut self) {
        let mut linears = [&mut self.q_proj, &mut self.k_proj, &mut self.v_proj];
        if let Some(joined) = join(&mut linears) {
            self.qkv = Some(joined);
        }
    }

    /// Attention of q, k and v in the projections' layout (`[b, t, heads, d]`) over the cache
    /// and the new keys, or without a mask: RoPE heads first, then the core. Returns
    /// `[b, kv, groups · t, d]`.
    #[allow(clippy::too_many_arguments)]
    fn eager(
        &self,
        q: Tensor<4>,
        k: Tensor<4>,
        v: Tensor<4>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: Option<&Tensor<4, Bool>>,
        cache: Option<&mut LayerCache>,
        scale: f64,
    ) -> Tensor<4> {
        let [b, t, h, d] = q.dims();
        let kv = self.n_kv_heads;
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
        match mask {
            // One autodiff node with a closed-form backward (same forward ops).
            Some(m) => attention_core(q, k, v, m.clone(), h, scale),
            None => attention_eager(q, k, v, None, h, scale),
        }
    }
}

/// q, k and v as the projections produced them (a value that lives for one forward, moved
/// whole: its variants' sizes do not matter).
#[allow(clippy::large_enum_variant)]
enum Projected {
    /// One product each, `[b, t, heads, d]`.
    Separate([Tensor<4>; 3]),
    /// One joined product, `[b, t, heads + 2 · kv, d]`, its parts' head counts (q's, k's, v's)
    /// and (where all three have adapters) each adapter's product, `[b, t, heads, d]`, with the
    /// scale that makes it the delta to add to its part (cast to the base's dtype).
    Joined {
        base: Tensor<4>,
        heads: [usize; 3],
        deltas: Option<([Tensor<4>; 3], f64)>,
    },
}

impl Projected {
    /// The device they are on.
    fn device(&self) -> Device {
        match self {
            Projected::Separate([q, ..]) => q.device(),
            Projected::Joined { base, .. } => base.device(),
        }
    }

    /// q, k and v, `[b, t, heads, d]` each: a joined product's parts (views) plus the deltas.
    fn separate(self) -> [Tensor<4>; 3] {
        match self {
            Projected::Separate(qkv) => qkv,
            Projected::Joined {
                base,
                heads,
                deltas,
            } => {
                let mut from = 0;
                let mut deltas = deltas.map(|(d, scale)| (d.into_iter(), scale));
                heads.map(|n| {
                    let part = base.clone().slice(s![.., .., from..from + n]);
                    from += n;
                    match deltas.as_mut() {
                        Some((d, scale)) => {
                            let delta = d.next().expect("three deltas");
                            engram_ops::delta::add_delta_tensor(part, delta, *scale)
                        }
                        None => part,
                    }
                })
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::tensor::{Device, Distribution, Tensor};

    use super::{Attention, Projected};
    use crate::linear::{Joined, Linear};
    use crate::lora::LoraAdapter;

    /// q, k and v through the joined weight equal them through each projection, whichever of
    /// them have adapters: with adapters on q and v only (PEFT's Llama default), the joined
    /// path dropped both adapters' deltas (and so their gradients) on the GPU backends.
    #[test]
    fn joined_projections_keep_the_adapters_of_some_of_q_k_and_v() {
        let device = Device::flex();
        device.seed(3);
        let (hidden, heads, kv, d, rows) = (16, 2, 1, 8, 6);
        let random =
            |shape: [usize; 2]| Tensor::<2>::random(shape, Distribution::Normal(0.0, 0.5), &device);
        let linear = |d_out: usize| Linear::from_in_out(random([hidden, d_out]), None);
        let adapter = |name: &str, d_out: usize| {
            // B non-zero, so the delta shows; no dropout, so both paths draw nothing.
            LoraAdapter::from_factors(name, random([hidden, 4]), random([4, d_out]), 2.0, 0.0)
        };
        let x = Tensor::<2>::random([rows, hidden], Distribution::Normal(0.0, 1.0), &device)
            .unsqueeze::<3>();
        let targets: [&[usize]; 4] = [&[0, 2], &[1], &[0, 1, 2], &[]];
        for adapted in targets {
            let mut projections = [heads * d, kv * d, kv * d].map(linear);
            for &i in adapted {
                let n = projections[i].d_out();
                projections[i].lora = Some(adapter(&format!("p{i}"), n));
            }
            let [q_proj, k_proj, v_proj] = projections;
            let mut attention = Attention {
                q_proj,
                k_proj,
                v_proj,
                o_proj: linear(hidden),
                n_heads: heads,
                n_kv_heads: kv,
                head_dim: d,
                q_norm: None,
                k_norm: None,
                qkv: None,
            };
            let separate = attention.project(x.clone(), 2, 3).separate();
            assert!(matches!(
                attention.project(x.clone(), 2, 3),
                Projected::Separate(_)
            ));
            let weights = [&attention.q_proj, &attention.k_proj, &attention.v_proj]
                .map(|l| l.weight.val())
                .to_vec();
            attention.qkv = Some(Joined {
                weight: Param::from_tensor(Tensor::cat(weights, 1)),
                bias: None,
            });
            let joined = attention.project(x.clone(), 2, 3).separate();
            for (a, b) in separate.into_iter().zip(joined) {
                a.into_data()
                    .assert_approx_eq::<f32>(&b.into_data(), Default::default());
            }
        }
    }
}
