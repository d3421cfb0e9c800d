//! Masked softmax attention of grouped heads as one operation with a hand-derived backward (a
//! Burn backend extension).
//!
//! Differentiated op by op, as Burn's autodiff does for the eager path of
//! engram-model's `Attention::forward` (scores, scale, cast, mask, softmax composed of max,
//! shift, exp, sum and division, cast, product with the values), the backward of the part
//! between the two matmuls is some ten small operations — softmax's division and its broadcast
//! sum's reduction, `exp`'s product, the mask's fill, scalar products — which Burn's fusion ran
//! mostly one kernel each on GPU backends. Here the whole core is one autodiff node whose backward
//! is the closed form
//!
//! `S = scale · q·kᵀ` (f32, masked), `P = softmax(S)`, `o = P·v`:
//! `dv = Pᵀ·do`, `dP = do·vᵀ`, `dS = P ⊙ (dP − rowsum(dP ⊙ P))` (zero where masked),
//! `dq = scale · dS·k`, `dk = scale · dSᵀ·q`,
//!
//! four matmuls, one reduction and one element-wise pass. The forward runs the same operations
//! in the same order as before (same bits); gradients equal autodiff's op-by-op ones up to float
//! rounding (tests). Numerics follow transformers' eager attention: scores and softmax in f32,
//! probabilities cast back to the input dtype before the values' product; the backward forms
//! `dP` in the input dtype, as autograd does through that cast, and the softmax's gradient in f32,
//! scaled before its cast back (autograd scales after it: the same in f32, a rounding apart in
//! bf16).

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::tensor::{BoolTensor, FloatTensor};
use burn::backend::{Autodiff, Backend, FloatDType, TensorMetadata, backend_extension};
use burn::tensor::activation::softmax;
use burn::tensor::{Bool, DType, Shape, Tensor};

use crate::rope::RotaryOp;
use crate::seam::autodiff_node;

/// Query/key/value layout: `q: [b, kv, groups · t, d]`, `k`, `v: [b, kv, s, d]`, mask
/// `[b, 1, t, s]`; `heads = kv · groups`.
#[derive(Debug, Clone, Copy)]
struct Dims {
    b: usize,
    kv: usize,
    gt: usize,
    s: usize,
    heads: usize,
}

impl Dims {
    fn of<B: Backend>(q: &FloatTensor<B>, k: &FloatTensor<B>, heads: usize) -> Self {
        let (qs, ks) = (q.shape(), k.shape());
        Self {
            b: qs[0],
            kv: qs[1],
            gt: qs[2],
            s: ks[2],
            heads,
        }
    }

    /// `[b, heads, t, s]`: the scores per query head, as the mask broadcasts over them.
    fn per_head(&self) -> Shape {
        let t = self.gt * self.kv / self.heads;
        Shape::from([self.b, self.heads, t, self.s])
    }

    /// `[b, kv, groups · t, s]`: the scores as the grouped matmuls produce and read them.
    fn grouped(&self) -> Shape {
        Shape::from([self.b, self.kv, self.gt, self.s])
    }
}

/// The forward pieces: `(o, P, P')` with `P` the f32 probabilities `[b, heads, t, s]` and `P'`
/// them cast to the input dtype as the values' product read them (`[b, kv, groups · t, s]`;
/// for f32, a view of `P`).
fn forward_parts<B: Backend>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    mask: BoolTensor<B>,
    heads: usize,
    scale: f64,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let dims = Dims::of::<B>(&q, &k, heads);
    let dtype = FloatDType::from(q.dtype());
    let scores = B::float_matmul(q, B::float_swap_dims(k, 2, 3));
    let scores = B::float_cast(B::float_mul_scalar(scores, scale.into()), FloatDType::F32);
    let scores = B::float_reshape(scores, dims.per_head());
    let scores = B::float_mask_fill(scores, mask, (f32::MIN as f64).into());
    let probs = softmax_composed::<B>(scores, 3);
    let grouped = B::float_reshape(B::float_cast(probs.clone(), dtype), dims.grouped());
    (B::float_matmul(grouped.clone(), v), probs, grouped)
}

/// Burn's default `softmax` (max, shift, exp, sum, division), op for op: what autodiff runs for
/// `softmax` on every backend, where the CPU backend's own `softmax` is one fused kernel with its
/// own rounding.
fn softmax_composed<B: Backend>(x: FloatTensor<B>, dim: usize) -> FloatTensor<B> {
    let max = B::float_max_dim(B::float_detach(x.clone()), dim);
    let exp = B::float_exp(B::float_sub(x, max));
    let sum = B::float_sum_dim(exp.clone(), dim);
    B::float_div(exp, sum)
}

/// Masked softmax attention of grouped heads as one backend operation (see the module docs).
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait AttentionCoreOp: Backend + RotaryOp {
    /// `softmax(mask(scale · q·kᵀ)) · v` with the scores and softmax in f32, for `q`
    /// `[b, kv, groups · t, d]` (query heads sharing a key/value head stacked along the
    /// sequence), `k`, `v` `[b, kv, s, d]` and `mask` `[b, 1, t, s]` (true = masked);
    /// `heads = kv · groups`. Returns `[b, kv, groups · t, d]`.
    fn attention_core(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        heads: usize,
        scale: f64,
    ) -> FloatTensor<Self> {
        forward_parts::<Self>(q, k, v, mask, heads, scale).0
    }

    /// [`AttentionCoreOp::attention_core`] of q, k and v as the projections lay them out,
    /// `q: [b, t, heads, d]`, `k`, `v: [b, t, kv, d]`, with RoPE on q and k (`cos`/`sin`:
    /// [`crate::rope`]'s tables, `[b or 1, t, 1, d]`):
    /// [`RotaryOp::rotary_qkv_heads_first`], then the core. Returns `[b, kv, groups · t, d]`.
    #[allow(clippy::too_many_arguments)]
    fn attention_rope(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        heads: usize,
        scale: f64,
    ) -> FloatTensor<Self> {
        let (q, k, v) = heads_first::<Self>(q, k, v, cos, sin);
        forward_parts::<Self>(q, k, v, mask, heads, scale).0
    }

    /// [`AttentionCoreOp::attention_rope`] of q, k and v given as one joined product and three
    /// additions: `base: [b, t, heads + 2 · kv, d]` (the product with q, k and v's weights side
    /// by side) and its parts plus `scale` times `q`, `k`, `v` (the adapters' products, in their
    /// own dtype: [`RotaryOp::rotary_qkv_from_base_heads_first`]). The backward forms the joined
    /// gradient (`base`'s) and the three products' in one pass.
    #[allow(clippy::too_many_arguments)]
    fn attention_rope_joined(
        base: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        heads: usize,
        scale: f64,
        delta_scale: f64,
    ) -> FloatTensor<Self> {
        let (q, k, v) = joined_heads_first::<Self>(base, q, k, v, cos, sin, delta_scale);
        forward_parts::<Self>(q, k, v, mask, heads, scale).0
    }
}

/// Attention's q, k and v.
type Qkv<B> = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

/// q, k and v from the projections' layout to the core's: heads first, q and k rotated, the
/// query heads sharing a key/value head stacked (`q: [b, kv, groups · t, d]`).
fn heads_first<B: Backend + RotaryOp>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    cos: FloatTensor<B>,
    sin: FloatTensor<B>,
) -> Qkv<B> {
    let (b, t, kv) = (q.shape()[0], q.shape()[1], k.shape()[2]);
    let (q, k, v) = B::rotary_qkv_heads_first(q, k, v, cos, sin);
    (group::<B>(q, b, kv, t), k, v)
}

/// [`heads_first`] of joined projections ([`RotaryOp::rotary_qkv_from_base_heads_first`]).
fn joined_heads_first<B: Backend + RotaryOp>(
    base: FloatTensor<B>,
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    cos: FloatTensor<B>,
    sin: FloatTensor<B>,
    delta_scale: f64,
) -> Qkv<B> {
    let (b, t, kv) = (q.shape()[0], q.shape()[1], k.shape()[2]);
    let (q, k, v) = B::rotary_qkv_from_base_heads_first(base, q, k, v, cos, sin, delta_scale);
    (group::<B>(q, b, kv, t), k, v)
}

/// Heads-first `q` (`[b, heads, t, d]`) with the query heads sharing a key/value head stacked
/// along the sequence, `[b, kv, groups · t, d]`.
fn group<B: Backend>(q: FloatTensor<B>, b: usize, kv: usize, t: usize) -> FloatTensor<B> {
    let (h, d) = (q.shape()[1], q.shape()[3]);
    B::float_reshape(q, Shape::from([b, kv, (h / kv) * t, d]))
}

/// A rank-4 shape's sizes.
fn dims4<B: Backend>(x: &FloatTensor<B>) -> [usize; 4] {
    let s = x.shape();
    [s[0], s[1], s[2], s[3]]
}

impl AttentionCoreOp for burn::backend::Flex {}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl AttentionCoreOp for burn::backend::Cube {}

/// The backward's state: q, k, v, the probabilities (f32, and as the values' product read them:
/// cast to the input dtype, grouped), the mask, the head count and the scale. Keeping the cast
/// probabilities costs their size in the input dtype (nothing more in f32, where they are a
/// view) and saves the backward a cast kernel; autograd keeps both too (softmax's f32 output,
/// and the cast that the values' matmul saved).
type State<B> = (
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
    (FloatTensor<B>, FloatTensor<B>),
    BoolTensor<B>,
    usize,
    f64,
);

#[derive(Debug)]
struct AttentionCoreBackward;

impl<B: Backend> Backward<B, 3> for AttentionCoreBackward {
    type State = State<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let d_out = grads.consume::<B>(&ops.node);
        let need = ops.parents.each_ref().map(Option::is_some);
        let parts = core_gradients::<B>(ops.state, d_out, need);
        for (node, grad) in ops.parents.into_iter().zip(parts) {
            if let (Some(node), Some(grad)) = (node, grad) {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

/// The core's gradients `[dq, dk, dv]` (in its layout: `dq: [b, kv, groups · t, d]`) from the
/// output's, each where `need` asks for it (see the module docs for the closed form).
fn core_gradients<B: Backend>(
    state: State<B>,
    d_out: FloatTensor<B>,
    need: [bool; 3],
) -> [Option<FloatTensor<B>>; 3] {
    let (q, k, v, (probs, grouped), mask, heads, scale) = state;
    let dims = Dims::of::<B>(&q, &k, heads);
    let dtype = FloatDType::from(q.dtype());
    let dv = need[2].then(|| B::float_matmul(B::float_swap_dims(grouped, 2, 3), d_out.clone()));
    if !need[0] && !need[1] {
        return [None, None, dv];
    }
    // dP in the input dtype (the probabilities' cast), the softmax's gradient in f32.
    let dp = B::float_matmul(d_out, B::float_swap_dims(v, 2, 3));
    let dp = B::float_reshape(B::float_cast(dp, FloatDType::F32), dims.per_head());
    let row = B::float_sum_dim(B::float_mul(dp.clone(), probs.clone()), 3);
    let ds = B::float_mul(probs, B::float_sub(dp, row));
    let ds = B::float_mask_fill(ds, mask, 0f64.into());
    // The scores' scale, then their cast: autograd scales after the cast, in the input
    // dtype (the same in f32); scaling first lets one kernel do both.
    let ds = B::float_mul_scalar(ds, scale.into());
    let ds = B::float_reshape(B::float_cast(ds, dtype), dims.grouped());
    let dk = need[1].then(|| B::float_matmul(B::float_swap_dims(ds.clone(), 2, 3), q));
    let dq = need[0].then(|| B::float_matmul(ds, k));
    [dq, dk, dv]
}

/// [`AttentionCoreOp::attention_rope`]'s node: the core's backward, then the three gradients
/// back to the projections' layout in one [`RotaryOp::rotary_qkv_heads_first_inverse`].
#[derive(Debug)]
struct AttentionRopeBackward;

/// [`AttentionRopeBackward`]'s state: the core's, and the RoPE tables.
type RopeState<B> = (State<B>, FloatTensor<B>, FloatTensor<B>);

impl<B: Backend + RotaryOp> Backward<B, 3> for AttentionRopeBackward {
    type State = RopeState<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let d_out = grads.consume::<B>(&ops.node);
        let ([dq, dk, dv], cos, sin) = rope_core_gradients::<B>(ops.state, d_out);
        let (dq, dk, dv) = B::rotary_qkv_heads_first_inverse(dq, dk, dv, cos, sin);
        register::<B, 3>(grads, ops.parents.map(|p| p.map(|n| n.id)), [dq, dk, dv]);
    }
}

/// [`AttentionCoreOp::attention_rope_joined`]'s node: as [`AttentionRopeBackward`], the joined
/// gradient and the products' (scaled) formed by the same pass
/// ([`RotaryOp::rotary_qkv_heads_first_inverse_joined`]).
#[derive(Debug)]
struct AttentionRopeJoinedBackward {
    /// The products' scale.
    delta_scale: f64,
    /// The products' dtype (their gradients are cast back to it before the scale, as through
    /// an adapter delta's cast).
    delta_dtype: DType,
}

impl<B: Backend + RotaryOp> Backward<B, 4> for AttentionRopeJoinedBackward {
    type State = RopeState<B>;

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let d_out = grads.consume::<B>(&ops.node);
        let ([dq, dk, dv], cos, sin) = rope_core_gradients::<B>(ops.state, d_out);
        // The products' gradients cast back to their dtype, then scaled, by the same pass.
        let (dq, dk, dv, joined) = B::rotary_qkv_heads_first_inverse_joined(
            dq,
            dk,
            dv,
            cos,
            sin,
            self.delta_scale,
            self.delta_dtype,
        );
        let parents = ops.parents.map(|p| p.map(|n| n.id));
        let grads_in = [joined, dq, dk, dv];
        register::<B, 4>(grads, parents, grads_in);
    }
}

/// The core's three gradients heads first (`dq` as `[b, heads, t, d]`) and the tables: every
/// one is formed (the inverse takes all three at once).
fn rope_core_gradients<B: Backend>(
    state: RopeState<B>,
    d_out: FloatTensor<B>,
) -> ([FloatTensor<B>; 3], FloatTensor<B>, FloatTensor<B>) {
    let (core, cos, sin) = state;
    // k heads first, [b, kv, t, d] (no cache: as many keys as queries).
    let ([b, _, t, d], heads) = (dims4::<B>(&core.1), core.5);
    let [Some(dq), Some(dk), Some(dv)] = core_gradients::<B>(core, d_out, [true; 3]) else {
        unreachable!("every gradient was asked for");
    };
    let dq = B::float_reshape(dq, Shape::from([b, heads, t, d]));
    ([dq, dk, dv], cos, sin)
}

/// Registers each gradient with its parent node, where the parent is tracked (`Some`).
fn register<B: Backend, const N: usize>(
    grads: &mut Gradients,
    parents: [Option<NodeId>; N],
    gradients: [FloatTensor<B>; N],
) {
    for (node, grad) in parents.into_iter().zip(gradients) {
        if let Some(id) = node {
            grads.register::<B>(id, grad);
        }
    }
}

impl<B: AttentionCoreOp, C: CheckpointStrategy> AttentionCoreOp for Autodiff<B, C> {
    fn attention_core(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        heads: usize,
        scale: f64,
    ) -> FloatTensor<Self> {
        autodiff_node::<C, _, _, _, _>(
            AttentionCoreBackward,
            [q, k, v],
            mask,
            |[q, k, v], mask| {
                let (out, probs, grouped) =
                    forward_parts::<B>(q.clone(), k.clone(), v.clone(), mask.clone(), heads, scale);
                ((q, k, v, (probs, grouped), mask, heads, scale), out)
            },
            |[q, k, v], mask| forward_parts::<B>(q, k, v, mask, heads, scale).0,
        )
    }

    fn attention_rope(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        heads: usize,
        scale: f64,
    ) -> FloatTensor<Self> {
        let tables = (cos.into_primitive(), sin.into_primitive(), mask);
        rope_node::<B, C, _, 3>(
            AttentionRopeBackward,
            [q, k, v],
            tables,
            (heads, scale),
            |[q, k, v], cos, sin| heads_first::<B>(q, k, v, cos, sin),
            |[q, k, v], cos, sin, mask| B::attention_rope(q, k, v, cos, sin, mask, heads, scale),
        )
    }

    fn attention_rope_joined(
        base: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        heads: usize,
        scale: f64,
        delta_scale: f64,
    ) -> FloatTensor<Self> {
        let node = AttentionRopeJoinedBackward {
            delta_scale,
            delta_dtype: q.dtype(),
        };
        let tables = (cos.into_primitive(), sin.into_primitive(), mask);
        rope_node::<B, C, _, 4>(
            node,
            [base, q, k, v],
            tables,
            (heads, scale),
            |[base, q, k, v], cos, sin| {
                joined_heads_first::<B>(base, q, k, v, cos, sin, delta_scale)
            },
            |[base, q, k, v], cos, sin, mask| {
                B::attention_rope_joined(base, q, k, v, cos, sin, mask, heads, scale, delta_scale)
            },
        )
    }
}

/// Both RoPE attention ops under autodiff ([`autodiff_node`]): tracked, `first` lays the inputs
/// out heads first (rotating q and k) and the core runs keeping what `node`'s backward reads;
/// untracked, the inner backend's own op (`eager`: its kernel where it has one).
fn rope_node<B, C, N, const P: usize>(
    node: N,
    inputs: [FloatTensor<Autodiff<B, C>>; P],
    (cos, sin, mask): (FloatTensor<B>, FloatTensor<B>, BoolTensor<B>),
    (heads, scale): (usize, f64),
    first: impl FnOnce([FloatTensor<B>; P], FloatTensor<B>, FloatTensor<B>) -> Qkv<B>,
    eager: impl FnOnce(
        [FloatTensor<B>; P],
        FloatTensor<B>,
        FloatTensor<B>,
        BoolTensor<B>,
    ) -> FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>>
where
    B: AttentionCoreOp,
    C: CheckpointStrategy,
    N: Backward<B, P, State = RopeState<B>>,
{
    autodiff_node::<C, _, _, _, _>(
        node,
        inputs,
        (cos, sin, mask),
        |inputs, (cos, sin, mask)| {
            let (q, k, v) = first(inputs, cos.clone(), sin.clone());
            let (out, probs, grouped) =
                forward_parts::<B>(q.clone(), k.clone(), v.clone(), mask.clone(), heads, scale);
            (
                ((q, k, v, (probs, grouped), mask, heads, scale), cos, sin),
                out,
            )
        },
        |inputs, (cos, sin, mask)| eager(inputs, cos, sin, mask),
    )
}

on_dispatch! {
    /// [`AttentionCoreOp::attention_core`] on tensors, in one autodiff node: `q`
    /// `[b, kv, groups · t, d]`, `k`, `v` `[b, kv, s, d]`, `mask` `[b, 1, t, s]` (true = masked),
    /// `heads = kv · groups`; returns `[b, kv, groups · t, d]`.
    pub fn attention_core(
        q: Tensor<4>,
        k: Tensor<4>,
        v: Tensor<4>,
        mask: Tensor<4, Bool>,
        heads: usize,
        scale: f64,
    ) -> Tensor<4> => AttentionCoreOp::attention_core;
}

on_dispatch! {
    /// [`AttentionCoreOp::attention_rope`] on tensors, in one autodiff node: `q` `[b, t, heads,
    /// d]`, `k`, `v` `[b, t, kv, d]` (the projections' layout), RoPE tables `cos`/`sin` `[b or 1,
    /// t, 1, d]` (no gradient), `mask` `[b, 1, t, t]` (true = masked); returns `[b, kv, groups · t,
    /// d]`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_rope(
        q: Tensor<4>,
        k: Tensor<4>,
        v: Tensor<4>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: Tensor<4, Bool>,
        heads: usize,
        scale: f64,
    ) -> Tensor<4> => AttentionCoreOp::attention_rope;
}

on_dispatch! {
    /// [`AttentionCoreOp::attention_rope_joined`] on tensors, in one autodiff node: `base`
    /// `[b, t, heads + 2 · kv, d]` (q, k and v's product side by side), `q` `[b, t, heads, d]`,
    /// `k`, `v` `[b, t, kv, d]` (the adapters' products) added to its parts times `delta_scale`;
    /// otherwise as [`attention_rope`].
    #[allow(clippy::too_many_arguments)]
    pub fn attention_rope_joined(
        base: Tensor<4>,
        q: Tensor<4>,
        k: Tensor<4>,
        v: Tensor<4>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
        mask: Tensor<4, Bool>,
        heads: usize,
        scale: f64,
        delta_scale: f64,
    ) -> Tensor<4> => AttentionCoreOp::attention_rope_joined;
}

/// Eager grouped attention in Burn ops, differentiated op by op: `q: [b, kv, groups · t, d]`,
/// `k`, `v: [b, kv, s, d]`, `mask: [b, 1, t, s]` (true = masked), `heads = kv · groups`;
/// returns `[b, kv, groups · t, d]`. Scores and softmax in f32, probabilities cast back to the
/// input dtype, as transformers' eager path. With a mask, [`attention_core`] runs these ops as
/// one autodiff node.
pub fn attention_eager(
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

#[cfg(test)]
mod tests {
    use burn::tensor::{Bool, DType, Device, Distribution, Tensor};

    use crate::testing::{f32_values, max_rel_diff};

    use super::attention_core;
    use super::attention_eager;

    /// A packed batch's mask ([`crate::selfcheck::packed_mask`]).
    fn mask(device: &Device) -> Tensor<4, Bool> {
        crate::selfcheck::packed_mask(device)
    }

    /// The op's output and its q, k, v gradients against autodiff through the eager ops, for
    /// inputs in `dtype`: 4 query heads over 2 key/value heads.
    fn check(device: &Device, dtype: DType, tol: f32) {
        let (b, kv, groups, t, d) = (2, 2, 2, 5, 8);
        let normal = Distribution::Normal(0.0, 1.5);
        let q0 = Tensor::<4>::random([b, kv, groups * t, d], normal, device);
        let k0 = Tensor::<4>::random([b, kv, t, d], normal, device);
        let v0 = Tensor::<4>::random([b, kv, t, d], normal, device);
        let up = Tensor::<4>::random([b, kv, groups * t, d], normal, device);
        let m = mask(device);
        let run = |eager: bool| {
            let q = q0.clone().cast(dtype).require_grad();
            let k = k0.clone().cast(dtype).require_grad();
            let v = v0.clone().cast(dtype).require_grad();
            let scale = (d as f64).powf(-0.5);
            let (qa, ka, va) = (q.clone(), k.clone(), v.clone());
            let out = if eager {
                attention_eager(qa, ka, va, Some(m.clone()), kv * groups, scale)
            } else {
                attention_core(qa, ka, va, m.clone(), kv * groups, scale)
            };
            assert_eq!(out.dtype(), dtype);
            let grads = (out.clone().cast(DType::F32) * up.clone()).sum().backward();
            let g = |t: &Tensor<4>| f32_values(t.grad(&grads).unwrap());
            (f32_values(out), g(&q), g(&k), g(&v))
        };
        let (out, gq, gk, gv) = run(false);
        let (out_ref, gq_ref, gk_ref, gv_ref) = run(true);
        // The forward is the eager ops, in their order: the same bits.
        assert_eq!(out, out_ref, "{dtype:?} forward");
        for (name, got, want) in [("q", gq, gq_ref), ("k", gk, gk_ref), ("v", gv, gv_ref)] {
            let diff = max_rel_diff(&got, &want);
            assert!(diff <= tol, "{dtype:?}: {name} grad {diff} (tol {tol})");
            assert!(
                want.iter().any(|v| v.abs() > 0.1),
                "{name}: a real gradient"
            );
        }
    }

    #[test]
    fn gradients_match_autodiff_through_the_eager_ops() {
        let device = Device::flex().autodiff();
        device.seed(21);
        check(&device, DType::F32, 1e-5);
        check(&device, DType::BF16, 3e-2);
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn gradients_match_on_wgpu() {
        let device = crate::testing::wgpu_training_device();
        device.seed(22);
        check(&device, DType::F32, 1e-5);
    }

    /// [`super::attention_rope`] (`joined`: [`super::attention_rope_joined`], the inputs a
    /// joined base plus scaled products) against RoPE composed of Burn ops, a heads-first view
    /// and the eager core, differentiated op by op: 4 query heads over 2 key/value heads in the
    /// projections' layout, per-row (packed) tables. Returns the launches of the op's forward
    /// and backward by kernel on a GPU backend.
    fn check_rope(device: &Device, dtype: DType, tol: f32, joined: bool) -> Vec<(String, u64)> {
        check_rope_with(device, dtype, dtype, tol, joined)
    }

    /// [`check_rope`] with the products (q, k, v of a joined op) in `delta_dtype`, as f32
    /// adapters on a bf16 model give them ([`crate::selfcheck::rope_attention_pair`]).
    fn check_rope_with(
        device: &Device,
        dtype: DType,
        delta_dtype: DType,
        tol: f32,
        joined: bool,
    ) -> Vec<(String, u64)> {
        let (op, reference) =
            crate::selfcheck::rope_attention_pair(device, dtype, delta_dtype, joined);
        // The f32 forward computes what the composed ops do, in their order; on a GPU backend
        // (launches counted) the kernel's sums and casts too, so half precision gives the same
        // bits there (f16 on llvmpipe, f32 products on an f16 base included).
        if dtype == DType::F32 || !joined || !op.launches.is_empty() {
            assert_eq!(op.output, reference.output, "{dtype:?} forward");
        } else {
            let diff = max_rel_diff(&op.output, &reference.output);
            assert!(diff <= tol, "{dtype:?} forward {diff}");
        }
        let names = ["q", "k", "v", "base"];
        for ((name, got), want) in names.into_iter().zip(op.gradients).zip(reference.gradients) {
            if name == "base" && !joined {
                continue;
            }
            let diff = max_rel_diff(&got, &want);
            assert!(diff <= tol, "{dtype:?}: {name} grad {diff} (tol {tol})");
            assert!(
                want.iter().any(|v| v.abs() > 0.1),
                "{name}: a real gradient"
            );
        }
        op.launches
    }

    #[test]
    fn rope_attention_matches_autodiff_through_the_composed_ops() {
        let device = Device::flex().autodiff();
        device.seed(24);
        for joined in [false, true] {
            check_rope(&device, DType::F32, 1e-5, joined);
            check_rope(&device, DType::BF16, 3e-2, joined);
        }
        // A bf16 model's joined product with f32 adapters' products.
        check_rope_with(&device, DType::BF16, DType::F32, 3e-2, true);
    }

    /// On wgpu, one kernel lays out q, k and v each way (RoPE on q and k, and v's layout copy;
    /// the three gradients back to the projections' layout), joined projections' sums and
    /// gradient included.
    #[cfg(feature = "wgpu")]
    #[test]
    fn rope_attention_matches_on_wgpu_with_one_layout_kernel_each_way() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        device.seed(25);
        // f16: the kernels' half-precision path (WGSL has no bf16; CUDA compiles the same
        // generic code for it), products in the base's dtype.
        for (dtype, tol) in [(DType::F32, 1e-5), (DType::F16, 1e-2)] {
            for joined in [false, true] {
                let launches = check_rope(&device, dtype, tol, joined);
                let named = |part: &str| crate::launches::launched_named(&launches, part);
                assert_eq!(
                    named("RopeQkv"),
                    2,
                    "{dtype:?} joined {joined}: {launches:?}"
                );
                // Counted by name: the lock keeps the other RoPE tests out, and other tests of
                // the binary may launch other kernels meanwhile.
                assert_eq!(named("Rope"), 2, "{dtype:?} joined {joined}: {launches:?}");
            }
        }
        // f32 products on an f16 base (as f32 adapters on a bf16 model): the sums, casts and
        // scales inside the same one kernel each way, so no launch more than with f16 products.
        let total = |l: &[(String, u64)]| l.iter().map(|(_, n)| n).sum::<u64>();
        let same = check_rope_with(&device, DType::F16, DType::F16, 1e-2, true);
        let mixed = check_rope_with(&device, DType::F16, DType::F32, 1e-2, true);
        let named = |part: &str| crate::launches::launched_named(&mixed, part);
        assert_eq!(named("RopeQkv"), 2, "f16 base, f32 products: {mixed:?}");
        assert_eq!(total(&mixed), total(&same), "{mixed:?}\n{same:?}");
        // The backward reads the half probabilities the forward's values product read (kept in
        // the node's state) rather than casting the f32 ones again: no cast kernel of its own.
        for launches in [&same, &mixed] {
            let casts = crate::launches::launched_named(launches, "CastElement");
            assert_eq!(casts, 0, "{launches:?}");
        }
    }

    #[test]
    fn a_frozen_query_gets_no_gradient_and_the_others_still_do() {
        let device = Device::flex().autodiff();
        device.seed(23);
        let normal = Distribution::Normal(0.0, 1.0);
        let q = Tensor::<4>::random([2, 2, 10, 8], normal, &device);
        let k = Tensor::<4>::random([2, 2, 5, 8], normal, &device).require_grad();
        let v = Tensor::<4>::random([2, 2, 5, 8], normal, &device).require_grad();
        let out = attention_core(q.clone(), k.clone(), v.clone(), mask(&device), 4, 0.5);
        let grads = out.sum().backward();
        assert!(q.grad(&grads).is_none());
        assert!(k.grad(&grads).is_some() && v.grad(&grads).is_some());
    }
}
