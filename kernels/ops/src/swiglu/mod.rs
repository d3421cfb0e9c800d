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
//! happens in the same pass. On the CubeCL backends (f32) each direction is one kernel, where
//! the composed forward is a slice-and-add kernel per half (a slice does not fuse) and an
//! element-wise one; its `σ` is `1 / (1 + e^−x)`, a rounding apart from Burn's.

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

/// `base`'s two halves along the last axis plus `scale` times `g` and `u` (each product cast
/// to `base`'s dtype after its scale, as an adapter's delta is): `(base_g + s·g, base_u + s·u)`.
fn inputs<B: Backend>(
    base: FloatTensor<B>,
    g: FloatTensor<B>,
    u: FloatTensor<B>,
    scale: f64,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let shape = g.shape();
    let (rank, i) = (shape.num_dims(), shape[shape.num_dims() - 1]);
    let dtype = base.dtype();
    let add = |from: usize, delta: FloatTensor<B>| {
        let mut slices = vec![Slice::from(..); rank];
        slices[rank - 1] = Slice::from(from..from + i);
        let half = B::float_slice(base.clone(), &slices);
        let delta = B::float_mul_scalar(delta, scale.into());
        let delta = if delta.dtype() == dtype {
            delta
        } else {
            B::float_cast(delta, FloatDType::from(dtype))
        };
        B::float_add(half, delta)
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
    let product = |d: FloatTensor<B>| {
        let d = if FloatDType::from(d.dtype()) == product_dtype {
            d
        } else {
            B::float_cast(d, product_dtype)
        };
        B::float_mul_scalar(d, scale.into())
    };
    (d_base, product(dg), product(du))
}

/// SwiGLU of a joined product (see the module docs).
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait SwigluOp: Backend {
    /// `silu(base_g + s·g) · (base_u + s·u)`: `base` `[.., 2 · i]` (gate's part first), `g`,
    /// `u` `[.., i]` (the adapters' products, in their own dtype; each scaled, then cast to
    /// `base`'s). Returns `[.., i]`.
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

/// On the CubeCL backends each direction is one kernel ([`crate::swiglu::cube`]) where it
/// takes the inputs, else the Burn ops.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl SwigluOp for burn::backend::Cube {
    fn swiglu_joined(
        base: FloatTensor<Self>,
        g: FloatTensor<Self>,
        u: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        if crate::swiglu::cube::supported(&base, &g, &u, &g) {
            return crate::swiglu::cube::forward(base, g, u, scale);
        }
        forward_composed::<Self>(base, g, u, scale)
    }

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
    use burn::tensor::activation::silu;
    use burn::tensor::{DType, Device, Distribution, Tensor, s};

    use crate::testing::{f32_values, max_rel_diff};

    use super::swiglu_joined;

    /// The op's output and gradients against autodiff through slices, scaled sums and
    /// `silu(g) · u`.
    /// Returns the launches of the op's forward and backward by kernel on a GPU backend.
    fn check(device: &Device, dtype: DType, tol: f32) -> Vec<(String, u64)> {
        check_with(device, dtype, dtype, tol)
    }

    /// [`check`] with the products `g`, `u` in `product_dtype`, as f32 adapters on a bf16
    /// model give them.
    fn check_with(
        device: &Device,
        dtype: DType,
        product_dtype: DType,
        tol: f32,
    ) -> Vec<(String, u64)> {
        let (n, i) = (6, 8);
        let normal = Distribution::Normal(0.0, 1.5);
        let base0 = Tensor::<3>::random([1, n, 2 * i], normal, device);
        let g0 = Tensor::<3>::random([1, n, i], normal, device);
        let u0 = Tensor::<3>::random([1, n, i], normal, device);
        let up = Tensor::<3>::random([1, n, i], normal, device);
        let mut launches = Vec::new();
        let mut run = |joined: bool| {
            let base = base0.clone().cast(dtype).require_grad();
            let g = g0.clone().cast(product_dtype).require_grad();
            let u = u0.clone().cast(product_dtype).require_grad();
            // Inputs computed before counting.
            for t in [&base, &g, &u, &up] {
                let _ = f32_values(t.clone().sum());
            }
            let counter = crate::LaunchCounter::start(device);
            let h = if joined {
                swiglu_joined(base.clone(), g.clone(), u.clone(), 0.75)
            } else {
                let scaled = |t: &Tensor<3>| t.clone().mul_scalar(0.75).cast(dtype);
                let gi = base.clone().slice(s![.., .., 0..i]) + scaled(&g);
                let ui = base.clone().slice(s![.., .., i..2 * i]) + scaled(&u);
                silu(gi) * ui
            };
            let grads = (h.clone().cast(DType::F32) * up.clone()).sum().backward();
            let grad = |t: &Tensor<3>| f32_values(t.grad(&grads).unwrap());
            let values = (f32_values(h), grad(&base), grad(&g), grad(&u));
            if let (true, Some(c)) = (joined, counter) {
                launches = c.by_kernel();
            }
            values
        };
        let (h, gb, gg, gu) = run(true);
        let (h_ref, gb_ref, gg_ref, gu_ref) = run(false);
        assert!(max_rel_diff(&h, &h_ref) <= tol, "{dtype:?} forward");
        for (name, got, want) in [("base", gb, gb_ref), ("g", gg, gg_ref), ("u", gu, gu_ref)] {
            let diff = max_rel_diff(&got, &want);
            assert!(diff <= tol, "{dtype:?}: {name} grad {diff} (tol {tol})");
            assert!(
                want.iter().any(|v| v.abs() > 0.1),
                "{name}: a real gradient"
            );
        }
        launches
    }

    #[test]
    fn gradients_match_autodiff_through_the_composed_ops() {
        let device = Device::flex().autodiff();
        device.seed(41);
        check(&device, DType::F32, 1e-5);
        check(&device, DType::BF16, 3e-2);
        // A bf16 model's joined product with f32 adapters' products.
        check_with(&device, DType::BF16, DType::F32, 3e-2);
    }

    /// On wgpu each direction is one kernel; the backward's writes the joined gradient and the
    /// products'.
    #[cfg(feature = "wgpu")]
    #[test]
    fn gradients_match_on_wgpu_with_one_backward_kernel() {
        let _g = crate::testing::train_lock();
        let device = crate::open_device("wgpu")
            .expect("a wgpu adapter (CI installs llvmpipe)")
            .autodiff();
        device.seed(42);
        let launches = check(&device, DType::F32, 1e-5);
        let swiglu = crate::launches::launched_named(&launches, "Swiglu");
        assert_eq!(swiglu, 2, "{launches:?}");
    }
}
