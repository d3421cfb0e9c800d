//! SwiGLU of a joined gate/up product as one operation with a hand-derived backward (a Burn
//! backend extension): `h = silu(g) · u` with `g = base_g + δg`, `u = base_u + δu`, where `base`
//! is the product of the input with gate's and up's weights side by side (`[.., 2 · i]`, gate's
//! part first) and `δg`, `δu` the adapters' deltas.
//!
//! Differentiated op by op, the joined product's gradient would be formed by slicing's backward
//! (a zero fill and a slice-assign for each part, then their sum); here the backward writes it
//! whole, with the deltas' gradients, from the closed form
//!
//! `du = dh · silu(g)`, `dg = ds · σ(g) + σ(g)(1 − σ(g)) · (ds · g)` with `ds = dh · u`,
//!
//! the terms autodiff forms for `silu(g) = g · σ(g)` and the product, in that order. The deltas
//! come in as the adapters' unscaled products with their scale, so the scale of their gradients
//! happens in the same pass. On the CubeCL backends the backward is one kernel, in f32, f16 or
//! bf16, with the products in the joined product's dtype or their own (f32 adapters on a bf16
//! model), where the composed backward took two fused element-wise kernels and a concatenation;
//! its `σ` is `1 / (1 + e^−x)` in f32, a rounding apart from Burn's (`swiglu/cube.rs`). The
//! forward is Burn's ops everywhere: fusion folds them into the down projection's product, so
//! they take no launch of their own (a kernel of ours did: on llvmpipe a tiny model's training
//! step took 3 launches more in f32 and 2 more in f16 with it).

pub mod cpu;

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube;

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, FloatDType, TensorMetadata, backend_extension};
use burn::tensor::{Slice, Tensor};

use crate::seam::autodiff_node;

/// `base`'s two halves along the last axis plus `scale` times `g` and `u` (each added in PEFT's
/// order, [`crate::delta`]): `(base_g + s·g, base_u + s·u)`.
fn inputs<B: Backend>(
    base: FloatTensor<B>,
    g: FloatTensor<B>,
    u: FloatTensor<B>,
    scale: f64,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let shape = g.shape();
    let (rank, i) = (shape.num_dims(), shape[shape.num_dims() - 1]);
    let dtype = base.dtype();
    // Products in another dtype are added in f32 (PEFT's order): the joined product is cast
    // whole, before it is sliced — one cast kernel, where each half's cast (of a slice, which
    // does not fuse) took one of its own.
    let base = if g.dtype() == dtype {
        base
    } else {
        B::float_cast(base, FloatDType::F32)
    };
    let add = |from: usize, delta: FloatTensor<B>| {
        let mut slices = vec![Slice::from(..); rank];
        slices[rank - 1] = Slice::from(from..from + i);
        let half = B::float_slice(base.clone(), &slices);
        let sum = crate::delta::add_delta::<B>(half, delta, scale);
        crate::cast::cast_to::<B>(sum, FloatDType::from(dtype))
    };
    (add(0, g), add(i, u))
}

/// [`SwigluOp::swiglu_joined`] in Burn ops: `silu(g) · u` of [`inputs`], as the model's
/// `silu(g) * u`.
fn forward_composed<B: Backend>(
    base: FloatTensor<B>,
    g: FloatTensor<B>,
    u: FloatTensor<B>,
    scale: f64,
) -> FloatTensor<B> {
    let (g, u) = inputs::<B>(base, g, u, scale);
    let silu = B::float_mul(g.clone(), B::sigmoid(g));
    B::float_mul(silu, u)
}

/// The three gradients `(d_base, dg, du)` of [`SwigluOp::swiglu_joined`] in Burn ops (see the
/// module docs); `dg` and `du` are the products' (cast back to their dtype, then scaled).
fn backward_composed<B: Backend>(
    base: FloatTensor<B>,
    g: FloatTensor<B>,
    u: FloatTensor<B>,
    dh: FloatTensor<B>,
    scale: f64,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let last = g.shape().num_dims() - 1;
    let product_dtype = FloatDType::from(g.dtype());
    let (g, u) = inputs::<B>(base, g, u, scale);
    let sig = B::sigmoid(g.clone());
    let du = B::float_mul(dh.clone(), B::float_mul(g.clone(), sig.clone()));
    let ds = B::float_mul(dh, u);
    let dg = B::float_add(
        B::float_mul(ds.clone(), sig.clone()),
        B::sigmoid_backward(sig, B::float_mul(ds, g)),
    );
    let d_base = B::float_cat(vec![dg.clone(), du.clone()], last);
    let product = |d| crate::delta::delta_gradient::<B>(d, product_dtype, scale);
    (d_base, product(dg), product(du))
}

/// SwiGLU of a joined product (see the module docs).
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait SwigluOp: Backend {
    /// `silu(base_g + s·g) · (base_u + s·u)`: `base` `[.., 2 · i]` (gate's part first), `g`,
    /// `u` `[.., i]` (the adapters' products, in their own dtype; each scaled and added in
    /// PEFT's order, [`crate::delta`]). Returns `[.., i]`.
    fn swiglu_joined(
        base: FloatTensor<Self>,
        g: FloatTensor<Self>,
        u: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        forward_composed::<Self>(base, g, u, scale)
    }

    /// The gradients of [`SwigluOp::swiglu_joined`] from the output's, `dh`: `(d_base, dg,
    /// du)`.
    fn swiglu_joined_backward(
        base: FloatTensor<Self>,
        g: FloatTensor<Self>,
        u: FloatTensor<Self>,
        dh: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        backward_composed::<Self>(base, g, u, dh, scale)
    }
}

impl SwigluOp for burn::backend::Flex {}

/// On the CubeCL backends the backward is one kernel ([`crate::swiglu::cube`]) where it takes
/// the inputs, else the Burn ops. The forward stays the Burn ops: Burn's fusion folds them into
/// the kernel that reads `h` (the down projection's product), where an opaque kernel cost a
/// launch of its own and broke fusions beside it.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl SwigluOp for burn::backend::Cube {
    fn swiglu_joined_backward(
        base: FloatTensor<Self>,
        g: FloatTensor<Self>,
        u: FloatTensor<Self>,
        dh: FloatTensor<Self>,
        scale: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        if crate::swiglu::cube::supported(&base, &g, &u, &dh) {
            crate::swiglu::cube::backward(base, g, u, dh, scale)
        } else {
            backward_composed::<Self>(base, g, u, dh, scale)
        }
    }
}

#[derive(Debug)]
struct SwigluBackward {
    /// The products' scale.
    scale: f64,
}

impl<B: Backend + SwigluOp> Backward<B, 3> for SwigluBackward {
    /// The forward's inputs: `base`, `g`, `u`.
    type State = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (base, g, u) = ops.state;
        let dh = grads.consume::<B>(&ops.node);
        let (d_base, dg, du) = B::swiglu_joined_backward(base, g, u, dh, self.scale);
        let parents: [Option<NodeId>; 3] = ops.parents.map(|p| p.map(|n| n.id));
        for (id, grad) in parents.into_iter().zip([d_base, dg, du]) {
            if let Some(id) = id {
                grads.register::<B>(id, grad);
            }
        }
    }
}

impl<B: Backend + SwigluOp, C: CheckpointStrategy> SwigluOp for Autodiff<B, C> {
    fn swiglu_joined(
        base: FloatTensor<Self>,
        g: FloatTensor<Self>,
        u: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        autodiff_node::<C, _, _, _, _>(
            SwigluBackward { scale },
            [base, g, u],
            (),
            |[base, g, u], ()| {
                let h = B::swiglu_joined(base.clone(), g.clone(), u.clone(), scale);
                ((base, g, u), h)
            },
            |[base, g, u], ()| B::swiglu_joined(base, g, u, scale),
        )
    }
}

/// [`SwigluOp::swiglu_joined`] on tensors, in one autodiff node: `base` `[.., 2 · i]` (gate's
/// part first), `g`, `u` `[.., i]` (the adapters' products) added to its halves times `scale`;
/// returns `silu(g) · u`, `[.., i]`.
pub fn swiglu_joined<const D: usize>(
    base: Tensor<D>,
    g: Tensor<D>,
    u: Tensor<D>,
    scale: f64,
) -> Tensor<D> {
    Tensor::from_dispatch(<burn::backend::Dispatch as SwigluOp>::swiglu_joined(
        base.into_dispatch(),
        g.into_dispatch(),
        u.into_dispatch(),
        scale,
    ))
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device};

    use crate::selfcheck::swiglu_pair;
    use crate::testing::max_rel_diff;

    /// The op's output and gradients against autodiff through slices, scaled sums and
    /// `silu(g) · u` ([`swiglu_pair`]), the joined product in `dtype`, the products `g`, `u` in
    /// `product_dtype` (f32 adapters on a bf16 model give f32 ones). Returns the launches of the
    /// op's forward and backward by kernel on a GPU backend, and whether the forward's bits are
    /// the reference's.
    fn check(
        device: &Device,
        dtype: DType,
        product_dtype: DType,
        tol: f32,
    ) -> (Vec<(String, u64)>, bool) {
        let (op, reference) = swiglu_pair(device, dtype, product_dtype);
        let diff = max_rel_diff(&op.output, &reference.output);
        assert!(diff <= tol, "{dtype:?} forward {diff} (tol {tol})");
        let same_bits = op.output == reference.output;
        let names = ["base", "g", "u"];
        for ((name, got), want) in names.into_iter().zip(op.gradients).zip(reference.gradients) {
            let diff = max_rel_diff(&got, &want);
            assert!(diff <= tol, "{dtype:?}: {name} grad {diff} (tol {tol})");
            assert!(
                want.iter().any(|v| v.abs() > 0.1),
                "{name}: a real gradient"
            );
        }
        (op.launches, same_bits)
    }

    #[test]
    fn gradients_match_autodiff_through_the_composed_ops() {
        let device = Device::flex().autodiff();
        device.seed(41);
        check(&device, DType::F32, DType::F32, 1e-5);
        check(&device, DType::BF16, DType::BF16, 3e-2);
        // A bf16 model's joined product with f32 adapters' products.
        check(&device, DType::BF16, DType::F32, 3e-2);
    }

    /// On wgpu the backward is one kernel, which writes the joined gradient and the products'.
    /// In f32, and in f16 — standing in for bf16, which WGSL lacks; the kernel's code is generic
    /// over both — with f16 products and with f32 ones, as a bf16 model's f32 adapters give.
    #[cfg(feature = "wgpu")]
    #[test]
    fn gradients_match_on_wgpu_with_one_backward_kernel_in_f32_and_f16() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        device.seed(42);
        // The forward's bits are the composed ops' (the slices' sums, `silu(g) · u`); f16's
        // gradients are within 1.0e-3 of the largest (an f16 ulp), the order of the backward's
        // terms being autodiff's.
        for (dtype, product, tol) in [
            (DType::F32, DType::F32, 1e-5),
            (DType::F16, DType::F16, 4e-3),
            (DType::F16, DType::F32, 4e-3),
        ] {
            let (launches, same_bits) = check(&device, dtype, product, tol);
            let named = |part: &str| crate::launches::launched_named(&launches, part);
            let what = format!("{dtype:?} with {product:?} products: {launches:?}");
            assert!(same_bits, "forward bits differ: {what}");
            assert_eq!(named("SwigluBackward"), 1, "{what}");
            // The concatenation of the composed backward's two halves.
            assert_eq!(named("SliceAssign"), 0, "{what}");
            // f32 products on a half base: the joined product is cast to f32 whole, once, not
            // each half apart.
            let casts = if dtype == product { 0 } else { 1 };
            assert!(named("CastElement") <= casts, "{what}");
        }
    }
}
