//! Rotate-half RoPE as one operation with a hand-derived backward (a Burn backend extension).
//!
//! The forward is [`crate::rope`]'s `y = x · cos + F(x) · sin`, where `F` swaps the two halves of
//! each head (one flip) and `sin` is the signed table `[-sin, sin]`. Differentiated op by op,
//! autodiff forms `dx = dy · cos + F(dy · sin)`: a product, a flip of it and a sum, three kernels
//! for each of q and k, since the flip cannot fuse. `F` is its own transpose and the signed
//! table satisfies `F(sin) = −sin` exactly (negation is exact), so
//!
//! `dx = dy · cos + F(sin) · F(dy) = dy · cos − sin · F(dy)`,
//!
//! the rotation by −θ: one flip of `dy` and one fused pass, two kernels. The two forms compute
//! the same products and the same sum, so the gradient is the same bits as autodiff's (tests);
//! the forward runs the same ops in the same order as before.

pub mod cpu;

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, unary};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, FloatDType, TensorMetadata, backend_extension};
use burn::tensor::{DType, Shape, Slice, Tensor};

use crate::seam::autodiff_node;

/// `F(x)`: the two halves of each head's last dimension swapped (`[b, t, h, d]`).
fn swap_halves<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let shape = x.shape();
    let [b, t, h, d] = [shape[0], shape[1], shape[2], shape[3]];
    let split = B::float_reshape(x, Shape::from([b, t, h, 2, d / 2]));
    B::float_reshape(B::float_flip(split, &[3]), Shape::from([b, t, h, d]))
}

/// `x · cos + F(x) · sin` (`inverse`: `x · cos − F(x) · sin`, the rotation by −θ), the tables
/// cast to `x`'s dtype, in Burn ops.
fn forward<B: Backend>(
    x: FloatTensor<B>,
    cos: FloatTensor<B>,
    sin: FloatTensor<B>,
    inverse: bool,
) -> FloatTensor<B> {
    let dtype = FloatDType::from(x.dtype());
    let swapped = swap_halves::<B>(x.clone());
    let a = B::float_mul(x, B::float_cast(cos, dtype));
    let b = B::float_mul(swapped, B::float_cast(sin, dtype));
    if inverse {
        B::float_sub(a, b)
    } else {
        B::float_add(a, b)
    }
}

#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait RotaryOp: Backend {
    /// `x · cos + F(x) · sin`, `x: [batch, seq, heads, head_dim]`, tables `[batch or 1, seq, 1,
    /// head_dim]`.
    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, cos, sin, false)
    }

    /// `x · cos − F(x) · sin`: the inverse rotation (the backward of [`RotaryOp::rotary`]).
    fn rotary_inverse(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        forward::<Self>(x, cos, sin, true)
    }

    /// [`RotaryOp::rotary`] of `x: [batch, seq, heads, head_dim]` returned heads first,
    /// `[batch, heads, seq, head_dim]`, as attention's products read q and k. By default the
    /// rotation and a view (`swap_dims`), which the next reshape or product copies.
    fn rotary_heads_first(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        swap::<Self>(Self::rotary(x, cos, sin))
    }

    /// The backward of [`RotaryOp::rotary_heads_first`]: the inverse rotation of `dy: [batch,
    /// heads, seq, head_dim]`, returned in the projections' layout, `[batch, seq, heads,
    /// head_dim]`.
    fn rotary_heads_first_inverse(
        dy: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        Self::rotary_inverse(swap::<Self>(dy), cos, sin)
    }

    /// Attention's three inputs heads first, from the projections' layout `[batch, seq, heads,
    /// head_dim]`: q and k rotated ([`RotaryOp::rotary_heads_first`]), v as it is. By default
    /// two rotations and a view of v.
    fn rotary_qkv_heads_first(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        (
            Self::rotary_heads_first(q, cos.clone(), sin.clone()),
            Self::rotary_heads_first(k, cos, sin),
            swap::<Self>(v),
        )
    }

    /// The backward of [`RotaryOp::rotary_qkv_heads_first`]: the gradients of q and k
    /// ([`RotaryOp::rotary_heads_first_inverse`]) and of v, each from heads first back to the
    /// projections' layout.
    fn rotary_qkv_heads_first_inverse(
        dq: FloatTensor<Self>,
        dk: FloatTensor<Self>,
        dv: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        (
            Self::rotary_heads_first_inverse(dq, cos.clone(), sin.clone()),
            Self::rotary_heads_first_inverse(dk, cos, sin),
            swap::<Self>(dv),
        )
    }

    /// [`RotaryOp::rotary_qkv_heads_first`] of joined projections: `base` `[batch, seq,
    /// heads_q + 2 · heads_kv, head_dim]` (q, k and v's product side by side), its parts plus
    /// `scale` times `q`, `k`, `v` (the adapters' products, in their own dtype; scaled, then
    /// added in PEFT's order, [`crate::delta`], as an adapter's delta is).
    #[allow(clippy::too_many_arguments)]
    fn rotary_qkv_from_base_heads_first(
        base: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let (q, k, v) = add_parts::<Self>(base, q, k, v, scale);
        Self::rotary_qkv_heads_first(q, k, v, cos, sin)
    }

    /// The backward of [`RotaryOp::rotary_qkv_from_base_heads_first`]: the three gradients
    /// back in the projections' layout, each cast to the products' dtype `delta_dtype` and then
    /// times `scale` (the products', as through an adapter delta's cast and scale), and, fourth,
    /// unscaled and side by side along the heads (`base`'s). By default the inverse, casts,
    /// products and a concatenation.
    fn rotary_qkv_heads_first_inverse_joined(
        dq: FloatTensor<Self>,
        dk: FloatTensor<Self>,
        dv: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        scale: f64,
        delta_dtype: DType,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    ) {
        let (dq, dk, dv) = Self::rotary_qkv_heads_first_inverse(dq, dk, dv, cos, sin);
        joined_scaled::<Self>(dq, dk, dv, scale, delta_dtype)
    }
}

/// `(s·dq, s·dk, s·dv, joined)`: the three gradients cast to `delta_dtype` (where they are in
/// another), times `scale`, and, as they are, side by side along the heads (axis 2).
fn joined_scaled<B: Backend>(
    dq: FloatTensor<B>,
    dk: FloatTensor<B>,
    dv: FloatTensor<B>,
    scale: f64,
    delta_dtype: DType,
) -> (
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
) {
    let joined = B::float_cat(vec![dq.clone(), dk.clone(), dv.clone()], 2);
    let scaled = |g| crate::delta::delta_gradient::<B>(g, FloatDType::from(delta_dtype), scale);
    (scaled(dq), scaled(dk), scaled(dv), joined)
}

/// `base`'s three parts along the heads (`[b, t, heads + 2 · kv, d]`), each plus `scale` times
/// `q`, `k`, `v` (`[b, t, heads or kv, d]`) in PEFT's order ([`crate::delta`]).
fn add_parts<B: Backend>(
    base: FloatTensor<B>,
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    scale: f64,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let (h, kv) = (q.shape()[2], k.shape()[2]);
    let add = |from: usize, n: usize, delta: FloatTensor<B>| {
        let slices = [
            Slice::from(..),
            Slice::from(..),
            Slice::from(from..from + n),
            Slice::from(..),
        ];
        let part = B::float_slice(base.clone(), &slices);
        crate::delta::add_delta::<B>(part, delta, scale)
    };
    (add(0, h, q), add(h, kv, k), add(h + kv, kv, v))
}

/// `x` with axes 1 and 2 swapped (a view).
fn swap<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_swap_dims(x, 1, 2)
}

impl RotaryOp for burn::backend::Flex {}

/// On the CubeCL backends both directions are one kernel ([`crate::rope::cube`]) where it
/// takes the input, else the Burn ops.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl RotaryOp for burn::backend::Cube {
    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        cube_rotary(x, cos, sin, false)
    }

    fn rotary_inverse(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        cube_rotary(x, cos, sin, true)
    }

    /// The kernel reads `x` through a heads-first view (the tables' view to match) and writes
    /// its output contiguous in that layout: one kernel, no copy.
    fn rotary_heads_first(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        type C = burn::backend::Cube;
        cube_rotary(swap::<C>(x), swap::<C>(cos), swap::<C>(sin), false)
    }

    /// The kernel reads `dy` through a view in the projections' layout and writes the gradient
    /// contiguous in it.
    fn rotary_heads_first_inverse(
        dy: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        cube_rotary(swap::<burn::backend::Cube>(dy), cos, sin, true)
    }

    /// One kernel reads q, k and v through heads-first views and writes all three contiguous
    /// in that layout (q and k rotated), where the default takes three launches.
    fn rotary_qkv_heads_first(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        type C = burn::backend::Cube;
        let (q, k, v) = (swap::<C>(q), swap::<C>(k), swap::<C>(v));
        cube_rotary_qkv(q, k, v, swap::<C>(cos), swap::<C>(sin), false)
    }

    /// One kernel reads the three gradients through views in the projections' layout and
    /// writes them contiguous in it.
    fn rotary_qkv_heads_first_inverse(
        dq: FloatTensor<Self>,
        dk: FloatTensor<Self>,
        dv: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        type C = burn::backend::Cube;
        let (dq, dk, dv) = (swap::<C>(dq), swap::<C>(dk), swap::<C>(dv));
        cube_rotary_qkv(dq, dk, dv, cos, sin, true)
    }

    /// One kernel reads the base and the products through heads-first views and writes q,
    /// k and v heads first.
    fn rotary_qkv_from_base_heads_first(
        base: FloatTensor<Self>,
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        type C = burn::backend::Cube;
        let (qs, ks, vs) = (swap::<C>(q), swap::<C>(k), swap::<C>(v));
        let (cs, ss) = (swap::<C>(cos), swap::<C>(sin));
        // The products in their dtype or another than the base's (f32 adapters on a bf16
        // model): each scaled in its own and added in PEFT's order, as `add_parts`.
        let float_base = crate::cube_op::float_type(base.dtype).is_some();
        if !(float_base && crate::rope::cube::supported_qkv(&qs, &ks, &vs, &cs, &ss)) {
            let (q, k, v) =
                add_parts::<C>(base, swap::<C>(qs), swap::<C>(ks), swap::<C>(vs), scale);
            return Self::rotary_qkv_heads_first(q, k, v, swap::<C>(cs), swap::<C>(ss));
        }
        let mode = crate::rope::cube::QkvMode {
            inverse: false,
            joined: false,
            scale: scale as f32,
            delta_dtype: qs.dtype,
        };
        let base = Some(swap::<C>(base));
        three(crate::rope::cube::rotary_qkv(
            qs, ks, vs, base, cs, ss, mode,
        ))
    }

    /// The same kernel casts and scales the gradients and writes the joined one.
    fn rotary_qkv_heads_first_inverse_joined(
        dq: FloatTensor<Self>,
        dk: FloatTensor<Self>,
        dv: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        scale: f64,
        delta_dtype: DType,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    ) {
        type C = burn::backend::Cube;
        let (dq, dk, dv) = (swap::<C>(dq), swap::<C>(dk), swap::<C>(dv));
        let float_delta = crate::cube_op::float_type(delta_dtype).is_some();
        if float_delta && crate::rope::cube::supported_qkv(&dq, &dk, &dv, &cos, &sin) {
            let mode = crate::rope::cube::QkvMode {
                inverse: true,
                joined: true,
                scale: scale as f32,
                delta_dtype,
            };
            let mut out = crate::rope::cube::rotary_qkv(dq, dk, dv, None, cos, sin, mode);
            let joined = out.pop().expect("four outputs");
            let (dq, dk, dv) = three(out);
            return (dq, dk, dv, joined);
        }
        let (dq, dk, dv) = cube_rotary_qkv(dq, dk, dv, cos, sin, true);
        joined_scaled::<C>(dq, dk, dv, scale, delta_dtype)
    }
}

/// The three tensors of a vector of three.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn three<T>(v: Vec<T>) -> (T, T, T) {
    let mut it = v.into_iter();
    let mut next = || it.next().expect("three tensors");
    (next(), next(), next())
}

/// q and k rotated (`inverse`: by −θ) and v as it is, all in their (view's) layout, on the
/// CubeCL backends: one kernel where it takes the inputs, else [`cube_rotary`] on q and k (v
/// left a view).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn cube_rotary_qkv(
    q: FloatTensor<burn::backend::Cube>,
    k: FloatTensor<burn::backend::Cube>,
    v: FloatTensor<burn::backend::Cube>,
    cos: FloatTensor<burn::backend::Cube>,
    sin: FloatTensor<burn::backend::Cube>,
    inverse: bool,
) -> (
    FloatTensor<burn::backend::Cube>,
    FloatTensor<burn::backend::Cube>,
    FloatTensor<burn::backend::Cube>,
) {
    if crate::rope::cube::supported_qkv(&q, &k, &v, &cos, &sin) {
        let mode = crate::rope::cube::QkvMode {
            inverse,
            joined: false,
            scale: 1.0,
            delta_dtype: q.dtype,
        };
        three(crate::rope::cube::rotary_qkv(q, k, v, None, cos, sin, mode))
    } else {
        (
            cube_rotary(q, cos.clone(), sin.clone(), inverse),
            cube_rotary(k, cos, sin, inverse),
            v,
        )
    }
}

/// [`forward`] on the CubeCL backends: the kernel where it takes the input.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn cube_rotary(
    x: FloatTensor<burn::backend::Cube>,
    cos: FloatTensor<burn::backend::Cube>,
    sin: FloatTensor<burn::backend::Cube>,
    inverse: bool,
) -> FloatTensor<burn::backend::Cube> {
    if crate::rope::cube::supported(&x, &cos, &sin) {
        crate::rope::cube::rotary(x, cos, sin, inverse)
    } else {
        forward::<burn::backend::Cube>(x, cos, sin, inverse)
    }
}

/// The backward of [`RotaryOp::rotary`] (`heads_first`: of [`RotaryOp::rotary_heads_first`]):
/// the inverse rotation of the output's gradient.
#[derive(Debug)]
struct RotaryBackward {
    heads_first: bool,
}

impl<B: Backend + RotaryOp> Backward<B, 1> for RotaryBackward {
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (cos, sin) = ops.state;
        let heads_first = self.heads_first;
        unary::<B, _>(ops.parents, ops.node, grads, |dy| {
            if heads_first {
                B::rotary_heads_first_inverse(dy, cos, sin)
            } else {
                B::rotary_inverse(dy, cos, sin)
            }
        });
    }
}

/// The rotation (`heads_first`: returned heads first) under autodiff: one node, whose backward
/// is the inverse rotation ([`RotaryBackward`]).
fn tracked<B: Backend + RotaryOp, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    cos: FloatTensor<Autodiff<B, C>>,
    sin: FloatTensor<Autodiff<B, C>>,
    heads_first: bool,
) -> FloatTensor<Autodiff<B, C>> {
    let (cos, sin) = (cos.into_primitive(), sin.into_primitive());
    let rotate = |x, cos, sin| {
        if heads_first {
            B::rotary_heads_first(x, cos, sin)
        } else {
            B::rotary(x, cos, sin)
        }
    };
    autodiff_node::<C, _, _, _, _>(
        RotaryBackward { heads_first },
        [x],
        (cos, sin),
        |[x], (cos, sin)| {
            let y = rotate(x, cos.clone(), sin.clone());
            ((cos, sin), y)
        },
        |[x], (cos, sin)| rotate(x, cos, sin),
    )
}

impl<B: Backend + RotaryOp, C: CheckpointStrategy> RotaryOp for Autodiff<B, C> {
    fn rotary(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        tracked::<B, C>(x, cos, sin, false)
    }

    fn rotary_heads_first(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        tracked::<B, C>(x, cos, sin, true)
    }
}

on_dispatch! {
    /// [`RotaryOp::rotary`] on tensors, in one autodiff node (the tables get no gradient).
    pub fn rotary(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> => RotaryOp::rotary;
}

on_dispatch! {
    /// [`RotaryOp::rotary_heads_first`] on tensors: `x` `[batch, seq, heads, head_dim]` in,
    /// `[batch, heads, seq, head_dim]` out, in one autodiff node (the tables get no gradient).
    pub fn rotary_heads_first(
        x: Tensor<4>,
        cos: &Tensor<4>,
        sin: &Tensor<4>,
    ) -> Tensor<4> => RotaryOp::rotary_heads_first;
}

/// Signed-form tables for the comparisons with the composed ops (tests, [`crate::selfcheck`]):
/// `[rows.len(), t, 1, d]`, row `i` for positions `rows[i]..rows[i] + t` at frequencies `0.7^i`
/// (`sin`'s first half the negated second), or one row shared by a batch (`rows = [0]`).
pub(crate) fn reference_tables(
    rows: &[usize],
    t: usize,
    d: usize,
    device: &burn::tensor::Device,
) -> (Tensor<4>, Tensor<4>) {
    let mut cos = Vec::new();
    let mut sin = Vec::new();
    for p in rows.iter().flat_map(|&r| r..r + t) {
        let f: Vec<f32> = (0..d / 2)
            .map(|i| p as f32 * 0.7f32.powi(i as i32))
            .collect();
        for sign in [-1f32, 1.0] {
            cos.extend(f.iter().map(|x| x.cos()));
            sin.extend(f.iter().map(|x| sign * x.sin()));
        }
    }
    let data = |v: Vec<f32>| burn::tensor::TensorData::new(v, [rows.len(), t, 1, d]);
    (
        Tensor::from_data(data(cos), device),
        Tensor::from_data(data(sin), device),
    )
}

/// RoPE composed of Burn tensor ops, which autodiff differentiates op by op: the reference
/// [`rotary`] is tested (and [`crate::selfcheck`] compares it) against.
pub(crate) fn rotary_composed(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    let [b, t, h, hd] = x.dims();
    let swapped = x
        .clone()
        .reshape([b, t, h, 2, hd / 2])
        .flip([3])
        .reshape([b, t, h, hd]);
    let dtype = x.dtype();
    x * cos.clone().cast(dtype) + swapped * sin.clone().cast(dtype)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Distribution, Tensor};

    use crate::testing::f32_values;

    use super::rotary_composed;
    use super::{rotary, rotary_heads_first};

    /// Tables of the signed form: `sin`'s first half the negated second; one row shared by
    /// the batch.
    fn tables(device: &Device) -> (Tensor<4>, Tensor<4>) {
        tables_for(&[0], device)
    }

    /// Tables with one row per position offset in `rows` (`[rows, 5, 1, 8]`, as packed batches
    /// have), or one shared row (`[0]`).
    fn tables_for(rows: &[usize], device: &Device) -> (Tensor<4>, Tensor<4>) {
        super::reference_tables(rows, 5, 8, device)
    }

    /// The op's output and gradient against autodiff through the composed ops: the same bits,
    /// with a table row shared by the batch and with one per batch row.
    fn check(device: &Device, dtype: DType) {
        for rows in [&[0][..], &[0, 3]] {
            let (cos, sin) = tables_for(rows, device);
            check_with(device, dtype, &cos, &sin);
        }
    }

    fn check_with(device: &Device, dtype: DType, cos: &Tensor<4>, sin: &Tensor<4>) {
        let x0 = Tensor::<4>::random([2, 5, 3, 8], Distribution::Normal(0.0, 1.0), device);
        let up = Tensor::<4>::random(x0.shape(), Distribution::Normal(0.0, 1.0), device);
        // 0: the composed ops, 1: the op, 2: the heads-first op (its output swapped back).
        let run = |form: u8| {
            let x = x0.clone().cast(dtype).require_grad();
            let y = match form {
                0 => rotary_composed(x.clone(), cos, sin),
                1 => rotary(x.clone(), cos, sin),
                _ => {
                    let y = rotary_heads_first(x.clone(), cos, sin);
                    assert_eq!(y.dims(), [2, 3, 5, 8]);
                    y.swap_dims(1, 2)
                }
            };
            let grads = (y.clone().cast(DType::F32) * up.clone()).sum().backward();
            (f32_values(y), f32_values(x.grad(&grads).unwrap()))
        };
        let (y_ref, g_ref) = run(0);
        let rows = cos.dims()[0];
        for (form, name) in [(1, "op"), (2, "heads-first op")] {
            let (y, g) = run(form);
            assert_eq!(y, y_ref, "{dtype:?}, {rows} table rows, {name}: forward");
            assert_eq!(g, g_ref, "{dtype:?}, {rows} table rows, {name}: gradient");
        }
        assert!(g_ref.iter().any(|v| v.abs() > 0.1));
    }

    /// Without autodiff (inference on the CPU backend) the op is the composed forward, with
    /// shared and per-row tables.
    #[test]
    fn without_autodiff_the_op_is_the_composed_forward() {
        let device = Device::flex();
        device.seed(33);
        for rows in [&[0][..], &[0, 3]] {
            let (cos, sin) = tables_for(rows, &device);
            let x = Tensor::<4>::random([2, 5, 3, 8], Distribution::Normal(0.0, 1.0), &device);
            let want = f32_values(rotary_composed(x.clone(), &cos, &sin));
            assert_eq!(
                f32_values(rotary(x.clone(), &cos, &sin)),
                want,
                "rows {rows:?}"
            );
            let heads_first = rotary_heads_first(x, &cos, &sin).swap_dims(1, 2);
            assert_eq!(f32_values(heads_first), want, "rows {rows:?}, heads first");
        }
    }

    #[test]
    fn the_gradient_is_autodiffs_to_the_bit() {
        let device = Device::flex().autodiff();
        device.seed(31);
        check(&device, DType::F32);
        check(&device, DType::BF16);
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn the_gradient_is_autodiffs_to_the_bit_on_wgpu() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        device.seed(32);
        check(&device, DType::F32);
        // The kernel in half precision (WGSL has no bf16; CUDA compiles the same generic code
        // for it): each product and the sum rounded as the composed ops round them.
        check(&device, DType::F16);
    }

    /// On wgpu each direction is one kernel launch (the composed form is a flip and a fused
    /// element-wise kernel), heads first too, in f32 and in f16 (f32 tables).
    #[cfg(feature = "wgpu")]
    #[test]
    fn each_direction_is_one_launch_on_wgpu() {
        let _g = crate::testing::train_lock();
        let device = crate::open_device("wgpu").expect("a wgpu adapter (CI installs llvmpipe)");
        one_launch_each_way(&device, DType::F32, 1e-5);
        one_launch_each_way(&device, DType::F16, 2e-3);
    }

    #[cfg(feature = "wgpu")]
    fn one_launch_each_way(device: &Device, dtype: DType, tol: f32) {
        use burn::backend::Dispatch;

        use super::RotaryOp;

        let (cos, sin) = tables(device);
        let x =
            Tensor::<4>::random([2, 5, 3, 8], Distribution::Normal(0.0, 1.0), device).cast(dtype);
        let _ = f32_values(x.clone());
        let counter = crate::LaunchCounter::start(device).unwrap();
        let y = rotary(x.clone(), &cos, &sin);
        let back = Tensor::<4>::from_dispatch(<Dispatch as RotaryOp>::rotary_inverse(
            y.into_dispatch(),
            cos.clone().into_dispatch(),
            sin.clone().into_dispatch(),
        ));
        let round_trip = f32_values(back);
        // Heads first: the kernel reads and writes the swapped layouts itself.
        let y = rotary_heads_first(x.clone(), &cos, &sin);
        assert_eq!(y.dims(), [2, 3, 5, 8]);
        let back = Tensor::<4>::from_dispatch(<Dispatch as RotaryOp>::rotary_heads_first_inverse(
            y.into_dispatch(),
            cos.clone().into_dispatch(),
            sin.clone().into_dispatch(),
        ));
        assert_eq!(back.dims(), [2, 5, 3, 8]);
        let round_trip_heads_first = f32_values(back);
        // Counted by name (the lock keeps this module's other RoPE test out; other tests of the
        // binary may launch other kernels meanwhile).
        assert_eq!(
            counter.launched_named("Rope"),
            4,
            "{dtype:?}: {:?}",
            counter.by_kernel()
        );
        assert_eq!(round_trip_heads_first, round_trip, "{dtype:?}");
        // cos² + sin² = 1: the inverse undoes the rotation (to rounding).
        let max = round_trip
            .iter()
            .zip(f32_values(x))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max < tol, "{dtype:?}: round trip off by {max}");
    }
}
