//! RMSNorm as one operation with a hand-derived backward (a Burn backend extension).
//!
//! Differentiated op by op, as Burn's autodiff does for the composed forward in
//! engram-model's `rms_norm_ops` order, RMSNorm's backward is about twenty small operations
//! (a `ones` tensor and a size-1 reduction for `mean_dim`, `sqrt` and `recip` gradients, the
//! broadcast products' reductions, …), which Burn's fusion mostly ran one kernel each on GPU
//! backends. Here the whole norm is one autodiff node whose backward is the closed form
//!
//! `n = x · r`, `r = (mean(x²) + ε)^-½`, `y = n · w`:
//! `dx = r · (g − n · mean(g · n))` with `g = dy · w`, and `dw = Σ_rows dy · n`,
//!
//! one reduction and two element-wise passes. The forward runs the same operations in the same
//! order as before (same bits); gradients equal autodiff's op-by-op ones up to float rounding
//! (tests). transformers' `LlamaRMSNorm` computes the statistics in f32 and casts the normalized
//! value back to the input dtype before the weight: so does this op, and its backward forms `g`
//! in the input dtype, as autograd does through that cast, and the rest in f32.

pub mod cpu;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, binary};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, FloatDType, TensorMetadata, backend_extension};
use burn::tensor::{DType, Shape, Tensor};

use crate::seam::autodiff_node;

/// The norm's forward pieces: `(y, r)` with `r = (mean(x²) + ε)^-½` per row, `[.., 1]`, f32.
fn forward_parts<B: Backend>(
    x: FloatTensor<B>,
    w: FloatTensor<B>,
    eps: f64,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let dtype = x.dtype();
    let last = x.shape().num_dims() - 1;
    let x32 = B::float_cast(x, FloatDType::F32);
    let var = B::float_mean_dim(B::float_powi_scalar(x32.clone(), 2.into()), last);
    let r = B::float_recip(B::float_sqrt(B::float_add_scalar(var, eps.into())));
    let normed = B::float_cast(B::float_mul(x32, r.clone()), float_dtype(dtype));
    let y = B::float_mul(normed, row_vector::<B>(w, dtype, last + 1));
    (y, r)
}

/// `w` (`[hidden]`) in `dtype`, shaped `[1, …, 1, hidden]` with `rank` dimensions.
fn row_vector<B: Backend>(w: FloatTensor<B>, dtype: DType, rank: usize) -> FloatTensor<B> {
    let hidden = w.shape().num_elements();
    let mut dims = vec![1; rank];
    dims[rank - 1] = hidden;
    let w = crate::cast::cast_to::<B>(w, float_dtype(dtype));
    B::float_reshape(w, Shape::from(dims))
}

fn float_dtype(dtype: DType) -> FloatDType {
    FloatDType::from(dtype)
}

/// RMSNorm as one backend operation (see the module docs).
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait RmsNormOp: Backend {
    /// `x · (mean(x²) + ε)^-½ · w` over the last dimension, statistics in f32; `w` is
    /// `[hidden]`.
    fn rms_norm(x: FloatTensor<Self>, w: FloatTensor<Self>, eps: f64) -> FloatTensor<Self> {
        forward_parts::<Self>(x, w, eps).0
    }
}

impl RmsNormOp for burn::backend::Flex {}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl RmsNormOp for burn::backend::Cube {}

/// The backward's state: the input, the weight and the per-row `r`.
type State<B> = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

#[derive(Debug)]
struct RmsNormBackward;

impl<B: Backend> Backward<B, 2> for RmsNormBackward {
    type State = State<B>;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (x, w, r) = ops.state;
        let (dtype, w_dtype) = (x.dtype(), w.dtype());
        let last = x.shape().num_dims() - 1;
        let n = B::float_mul(B::float_cast(x, FloatDType::F32), r.clone());
        let n_for_w = n.clone();
        binary::<B, _, _>(
            ops.parents,
            ops.node,
            grads,
            |dy| {
                // g = dy · w in the input dtype (the cast's gradient), the rest in f32.
                let g = B::float_mul(dy, row_vector::<B>(w, dtype, last + 1));
                let g = B::float_cast(g, FloatDType::F32);
                let dot = B::float_mean_dim(B::float_mul(g.clone(), n.clone()), last);
                let dx = B::float_mul(B::float_sub(g, B::float_mul(n, dot)), r);
                B::float_cast(dx, float_dtype(dtype))
            },
            |dy| {
                // The weight's gradient (a frozen norm has none: this closure then never runs).
                let prod = B::float_mul(dy, B::float_cast(n_for_w, float_dtype(dtype)));
                let cols = prod.shape()[last];
                let rows = prod.shape().num_elements() / cols;
                let flat = B::float_reshape(prod, Shape::from([rows, cols]));
                let dw = B::float_reshape(B::float_sum_dim(flat, 0), Shape::from([cols]));
                B::float_cast(dw, float_dtype(w_dtype))
            },
        );
    }
}

impl<B: Backend, C: CheckpointStrategy> RmsNormOp for Autodiff<B, C> {
    fn rms_norm(x: FloatTensor<Self>, w: FloatTensor<Self>, eps: f64) -> FloatTensor<Self> {
        autodiff_node::<C, _, _, _, _>(
            RmsNormBackward,
            [x, w],
            (),
            |[x, w], ()| {
                let (y, r) = forward_parts::<B>(x.clone(), w.clone(), eps);
                ((x, w, r), y)
            },
            |[x, w], ()| forward_parts::<B>(x, w, eps).0,
        )
    }
}

on_dispatch! {
    /// [`RmsNormOp::rms_norm`] on tensors: RMSNorm over the last dimension of `x` with weight `w`
    /// (`[hidden]`), in one autodiff node.
    pub fn rms_norm<const D: usize>(
        x: Tensor<D>,
        w: Tensor<1>,
        eps: f64,
    ) -> Tensor<D> => RmsNormOp::rms_norm;
}

/// RMSNorm composed of Burn tensor ops, which autodiff differentiates op by op: the reference
/// [`rms_norm`] is tested against.
#[cfg(test)]
pub(crate) fn rms_norm_composed<const D: usize>(x: Tensor<D>, w: Tensor<1>, eps: f64) -> Tensor<D> {
    let dtype = x.dtype();
    let x32 = x.cast(burn::tensor::DType::F32);
    let var = x32.clone().square().mean_dim(D - 1);
    let normed = (x32 * (var + eps).sqrt().recip()).cast(dtype);
    normed * w.cast(dtype).unsqueeze()
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Distribution, Tensor};

    use crate::testing::{f32_values, max_rel_diff};

    use super::rms_norm;
    use super::rms_norm_composed;

    /// The op's output and its gradients (x and a tracked weight) against autodiff through the
    /// composed ops, for inputs in `dtype`.
    fn check(device: &Device, dtype: DType, tol: f32) {
        let (rows, hidden) = ([2, 5], 48);
        let x0 = Tensor::<3>::random(
            [rows[0], rows[1], hidden],
            Distribution::Normal(0.0, 2.0),
            device,
        );
        let w0 = Tensor::<1>::random([hidden], Distribution::Normal(1.0, 0.5), device);
        let up = Tensor::<3>::random(x0.shape(), Distribution::Normal(0.0, 1.0), device);
        let run = |composed: bool| {
            let x = x0.clone().cast(dtype).require_grad();
            let w = w0.clone().cast(dtype).require_grad();
            let y = if composed {
                rms_norm_composed(x.clone(), w.clone(), 1e-5)
            } else {
                rms_norm(x.clone(), w.clone(), 1e-5)
            };
            assert_eq!(y.dtype(), dtype);
            let grads = (y.clone().cast(DType::F32) * up.clone()).sum().backward();
            let (gx, gw) = (x.grad(&grads).unwrap(), w.grad(&grads).unwrap());
            assert_eq!((gx.dtype(), gw.dtype()), (dtype, dtype));
            (f32_values(y), f32_values(gx), f32_values(gw))
        };
        let (y, gx, gw) = run(false);
        let (y_ref, gx_ref, gw_ref) = run(true);
        // The forward is the composed ops, in their order: the same bits on the CPU. A GPU
        // backend autotunes its reductions per fused trace, and the op's mean and the composed
        // one are two traces: where their recorded choices differ (the persistent autotune cache
        // holds choices other processes made, under other loads) the sums run in another order,
        // a float rounding apart (1 ulp, seen on llvmpipe with a shared cache).
        if crate::device::is_cpu(device) {
            assert_eq!(y, y_ref, "{dtype:?} forward");
        } else {
            let d = max_rel_diff(&y, &y_ref);
            assert!(d <= 1e-6, "{dtype:?} forward {d}");
        }
        let (dx, dw) = (max_rel_diff(&gx, &gx_ref), max_rel_diff(&gw, &gw_ref));
        assert!(
            dx <= tol && dw <= tol,
            "{dtype:?}: x grad {dx}, w grad {dw} (tol {tol})"
        );
        // Not a trivially small gradient.
        assert!(gx_ref.iter().any(|v| v.abs() > 0.1));
    }

    #[test]
    fn gradients_match_autodiff_through_the_composed_ops() {
        let device = Device::flex().autodiff();
        device.seed(7);
        check(&device, DType::F32, 1e-5);
        // bf16: the input-dtype rounding happens in other places than autodiff's chain.
        check(&device, DType::BF16, 2e-2);
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn gradients_match_on_wgpu() {
        let device = crate::testing::wgpu_training_device();
        device.seed(8);
        check(&device, DType::F32, 1e-5);
    }

    #[test]
    fn without_autodiff_the_op_is_the_composed_forward() {
        let device = Device::flex();
        device.seed(9);
        let x = Tensor::<3>::random([3, 4, 40], Distribution::Normal(0.0, 1.0), &device);
        let w = Tensor::<1>::random([40], Distribution::Normal(1.0, 0.5), &device);
        assert_eq!(
            f32_values(rms_norm(x.clone(), w.clone(), 1e-6)),
            f32_values(rms_norm_composed(x, w, 1e-6))
        );
    }
}
