//! Masked softmax attention of grouped heads as one operation with a hand-derived backward (a
//! Burn backend extension).
//!
//! Differentiated op by op, as Burn's autodiff does for the eager path of
//! [`crate::attention::Attention::forward`] (scores, scale, cast, mask, softmax composed of max,
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

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::{BoolTensor, FloatTensor};
use burn::backend::{Autodiff, Backend, FloatDType, TensorMetadata, backend_extension};
use burn::tensor::{Bool, Shape, Tensor};

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

/// The forward pieces: `(o, P)` with `P` the f32 probabilities `[b, heads, t, s]`.
fn forward_parts<B: Backend>(
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    mask: BoolTensor<B>,
    heads: usize,
    scale: f64,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let dims = Dims::of::<B>(&q, &k, heads);
    let dtype = FloatDType::from(q.dtype());
    let scores = B::float_matmul(q, B::float_swap_dims(k, 2, 3));
    let scores = B::float_cast(B::float_mul_scalar(scores, scale.into()), FloatDType::F32);
    let scores = B::float_reshape(scores, dims.per_head());
    let scores = B::float_mask_fill(scores, mask, (f32::MIN as f64).into());
    let probs = softmax_composed::<B>(scores, 3);
    let grouped = B::float_reshape(B::float_cast(probs.clone(), dtype), dims.grouped());
    (B::float_matmul(grouped, v), probs)
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
pub trait AttentionCoreOp: Backend {
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
}

impl AttentionCoreOp for burn::backend::Flex {}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl AttentionCoreOp for burn::backend::Cube {}

/// The backward's state: q, k, v, the f32 probabilities, the mask, the head count and the scale.
type State<B> = (
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
    BoolTensor<B>,
    usize,
    f64,
);

#[derive(Debug)]
struct AttentionCoreBackward;

impl<B: Backend> Backward<B, 3> for AttentionCoreBackward {
    type State = State<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (q, k, v, probs, mask, heads, scale) = ops.state;
        let [q_node, k_node, v_node] = ops.parents;
        let d_out = grads.consume::<B>(&ops.node);
        let dims = Dims::of::<B>(&q, &k, heads);
        let dtype = FloatDType::from(q.dtype());
        if let Some(node) = v_node {
            let grouped = B::float_reshape(B::float_cast(probs.clone(), dtype), dims.grouped());
            let dv = B::float_matmul(B::float_swap_dims(grouped, 2, 3), d_out.clone());
            grads.register::<B>(node.id, dv);
        }
        if q_node.is_none() && k_node.is_none() {
            return;
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
        if let Some(node) = k_node {
            let dk = B::float_matmul(B::float_swap_dims(ds.clone(), 2, 3), q);
            grads.register::<B>(node.id, dk);
        }
        if let Some(node) = q_node {
            grads.register::<B>(node.id, B::float_matmul(ds, k));
        }
    }
}

impl<B: Backend, C: CheckpointStrategy> AttentionCoreOp for Autodiff<B, C> {
    fn attention_core(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: BoolTensor<Self>,
        heads: usize,
        scale: f64,
    ) -> FloatTensor<Self> {
        match AttentionCoreBackward
            .prepare::<C>([q.node(), k.node(), v.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (q, k, v) = (q.into_primitive(), k.into_primitive(), v.into_primitive());
                let (out, probs) =
                    forward_parts::<B>(q.clone(), k.clone(), v.clone(), mask.clone(), heads, scale);
                prep.finish((q, k, v, probs, mask, heads, scale), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(
                forward_parts::<B>(
                    q.into_primitive(),
                    k.into_primitive(),
                    v.into_primitive(),
                    mask,
                    heads,
                    scale,
                )
                .0,
            ),
        }
    }
}

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
) -> Tensor<4> {
    Tensor::from_dispatch(
        <burn::backend::Dispatch as AttentionCoreOp>::attention_core(
            q.into_dispatch(),
            k.into_dispatch(),
            v.into_dispatch(),
            mask.into_dispatch(),
            heads,
            scale,
        ),
    )
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Bool, DType, Device, Distribution, Tensor};

    use engram_testkit::{f32_values, max_rel_diff};

    use super::attention_core;
    use crate::attention::attention_eager;
    use crate::mask::segment_mask;

    /// A packed batch's mask: row 0 holds sequences of 3 and 2 slots, row 1 one of 4 and a
    /// padding slot.
    fn mask(device: &Device) -> Tensor<4, Bool> {
        let segments = Tensor::from_data(
            burn::tensor::TensorData::new(vec![0i64, 0, 0, 1, 1, 0, 0, 0, 0, 5], [2, 5]),
            device,
        );
        segment_mask(segments)
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
        let device = crate::open_device("wgpu")
            .expect("a wgpu adapter (CI installs llvmpipe)")
            .autodiff();
        device.seed(22);
        check(&device, DType::F32, 1e-5);
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
