//! The labels' cross-entropy as one operation with a hand-derived backward (a Burn backend
//! extension).
//!
//! Differentiated op by op, as Burn's autodiff does for `log_softmax` (max, shift, exp, sum, log,
//! shift), `gather`, `sum`, `neg` and the division by the step's label count, the loss's backward
//! is some fifteen small operations — a zero tensor and a scatter for `gather`, the broadcast
//! shift's reduction, `log`'s and `exp`'s products, scalar ones for `neg` and the division —
//! which Burn's fusion ran mostly one kernel each on GPU backends. Here the loss is one autodiff
//! node whose backward is the closed form
//!
//! `L = −Σᵢ log pᵢ[tᵢ] / N` with `log p = log_softmax(logits)` (f32):
//! `dlogits = (g / N) · (p − onehot(t))`,
//!
//! one element-wise pass and one scatter — on the CubeCL backends one kernel
//! (its `cube.rs`). The forward runs Burn's `log_softmax` ops, the gather,
//! the sum and the division in the same order as before (same bits), except that on the
//! CubeCL backends the sum is a reduction over the rows, which fuses with the gather, the
//! negation and the division into one kernel (a summation order apart); the gradient equals
//! autodiff's op-by-op one up to float rounding (tests). The logits' gradient comes back in the
//! logits' dtype, as through the f32 cast it replaces.

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, unary};
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend, FloatDType, TensorMetadata, backend_extension};
use burn::tensor::{IndexingUpdateOp, Int, Shape, Tensor};

use crate::seam::autodiff_node;

/// The loss's forward pieces: `(loss, log p)`; `targets` is `[n, 1]`. The picked `log p` are
/// summed whole (`sum`), or `by_rows` as a reduction over the rows (`sum_dim`), which Burn's
/// fusion runs with the gather, the negation and the division as one reduce kernel where `sum`
/// takes a fill, a shared sum and an element-wise kernel (the sum's order may differ).
fn forward_parts<B: Backend>(
    logits: FloatTensor<B>,
    targets: IntTensor<B>,
    normalizer: f64,
    by_rows: bool,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let x = B::float_cast(logits, FloatDType::F32);
    // Burn's `log_softmax` over dimension 1, op for op.
    let max = B::float_max_dim(B::float_detach(x.clone()), 1);
    let shifted = B::float_sub(x, max);
    let log_sum_exp = B::float_log(B::float_sum_dim(B::float_exp(shifted.clone()), 1));
    let logp = B::float_sub(shifted, log_sum_exp);
    let picked = B::float_gather(1, logp.clone(), targets);
    let loss = if by_rows {
        let nll = B::float_neg(B::float_sum_dim(picked, 0));
        B::float_reshape(
            B::float_div_scalar(nll, normalizer.into()),
            Shape::from([1]),
        )
    } else {
        B::float_div_scalar(B::float_neg(B::float_sum(picked)), normalizer.into())
    };
    (loss, logp)
}

/// The labels' summed negative log-likelihood as one backend operation (see the module docs).
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait LabelNllOp: Backend {
    /// `−Σᵢ log_softmax(logits)[i, targets[i]] / normalizer` for `logits` `[n, vocab]` and
    /// `targets` `[n, 1]`, in f32, as a 1-element tensor.
    fn label_nll(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        normalizer: f64,
    ) -> FloatTensor<Self> {
        Self::label_nll_parts(logits, targets, normalizer).0
    }

    /// [`LabelNllOp::label_nll`] and the `log p` (f32, `[n, vocab]`) its backward reads.
    fn label_nll_parts(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        normalizer: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        forward_parts::<Self>(logits, targets, normalizer, false)
    }

    /// The logits' gradient (f32) of [`LabelNllOp::label_nll`] from `log p` (f32, the
    /// forward's), the targets and the loss's gradient `g` (one element): `(g / N) · (p −
    /// onehot(t))`.
    fn label_nll_backward(
        logp: FloatTensor<Self>,
        targets: IntTensor<Self>,
        g: FloatTensor<Self>,
        normalizer: f64,
    ) -> FloatTensor<Self> {
        backward_composed::<Self>(logp, targets, g, normalizer)
    }
}

/// [`LabelNllOp::label_nll_backward`] in Burn ops: `exp(log p) · s` and a scatter of `−s` into
/// the targets' columns, `s = g / N`.
fn backward_composed<B: Backend>(
    logp: FloatTensor<B>,
    targets: IntTensor<B>,
    g: FloatTensor<B>,
    normalizer: f64,
) -> FloatTensor<B> {
    // s = g / N, shaped [1, 1] to broadcast over the rows.
    let s = B::float_reshape(
        B::float_div_scalar(g, normalizer.into()),
        Shape::from([1, 1]),
    );
    let rows = targets.shape()[0];
    let p_scaled = B::float_mul(B::float_exp(logp), s.clone());
    let minus_s = B::float_expand(B::float_neg(s), Shape::from([rows, 1]));
    B::float_scatter(1, p_scaled, targets, minus_s, IndexingUpdateOp::Add)
}

impl LabelNllOp for burn::backend::Flex {}

/// On the CubeCL backends the backward is one kernel (its `cube.rs`).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl LabelNllOp for burn::backend::Cube {
    fn label_nll_parts(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        normalizer: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        forward_parts::<Self>(logits, targets, normalizer, true)
    }

    fn label_nll_backward(
        logp: FloatTensor<Self>,
        targets: IntTensor<Self>,
        g: FloatTensor<Self>,
        normalizer: f64,
    ) -> FloatTensor<Self> {
        if crate::cross_entropy::cube::supported(&logp, &targets, &g) {
            crate::cross_entropy::cube::backward(logp, targets, g, normalizer)
        } else {
            backward_composed::<Self>(logp, targets, g, normalizer)
        }
    }
}

/// The backward's state: `log p` (f32), the targets, the normalizer and the logits' dtype.
type State<B> = (FloatTensor<B>, IntTensor<B>, f64, FloatDType);

#[derive(Debug)]
struct LabelNllBackward;

impl<B: Backend + LabelNllOp> Backward<B, 1> for LabelNllBackward {
    type State = State<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (logp, targets, normalizer, dtype) = ops.state;
        unary::<B, _>(ops.parents, ops.node, grads, |g| {
            let d = B::label_nll_backward(logp, targets, g, normalizer);
            crate::cast::cast_to::<B>(d, dtype)
        });
    }
}

impl<B: Backend + LabelNllOp, C: CheckpointStrategy> LabelNllOp for Autodiff<B, C> {
    fn label_nll(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        normalizer: f64,
    ) -> FloatTensor<Self> {
        let dtype = FloatDType::from(logits.dtype());
        autodiff_node::<C, _, _, _, _>(
            LabelNllBackward,
            [logits],
            targets,
            |[logits], targets| {
                let (loss, logp) = B::label_nll_parts(logits, targets.clone(), normalizer);
                ((logp, targets, normalizer, dtype), loss)
            },
            |[logits], targets| B::label_nll(logits, targets, normalizer),
        )
    }
}

on_dispatch! {
    /// [`LabelNllOp::label_nll`] on tensors: `−Σᵢ log_softmax(logits)[i, targets[i]] / normalizer`
    /// for `logits` `[n, vocab]` and `targets` `[n, 1]`, a 1-element f32 tensor, in one autodiff
    /// node.
    pub fn label_nll(
        logits: Tensor<2>,
        targets: Tensor<2, Int>,
        normalizer: f64,
    ) -> Tensor<1> => LabelNllOp::label_nll;
}

/// The loss composed of Burn tensor ops, which autodiff differentiates op by op: the reference
/// [`label_nll`] is tested against.
#[cfg(test)]
pub(crate) fn label_nll_composed(
    logits: Tensor<2>,
    targets: Tensor<2, Int>,
    normalizer: f64,
) -> Tensor<1> {
    let logp = burn::tensor::activation::log_softmax(logits.cast(burn::tensor::DType::F32), 1);
    logp.gather(1, targets).sum().neg().div_scalar(normalizer)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Distribution, Int, Tensor, TensorData};

    use crate::testing::{f32_values, max_rel_diff};

    use super::{label_nll, label_nll_composed};

    /// The op's loss and its logits' gradient against autodiff through the composed ops, for
    /// logits in `dtype`; targets repeat (two rows predict the same token). Returns the kernels
    /// the op's backward launched (on a CubeCL device; empty elsewhere).
    fn check(device: &Device, dtype: DType, tol: f32) -> Vec<(String, u64)> {
        let (n, vocab) = (7, 50);
        let logits0 = Tensor::<2>::random([n, vocab], Distribution::Normal(0.0, 3.0), device);
        let targets: Tensor<2, Int> = Tensor::from_data(
            TensorData::new(vec![3i64, 49, 0, 3, 17, 25, 8], [n, 1]),
            device,
        );
        let run = |composed: bool| {
            let logits = logits0.clone().cast(dtype).require_grad();
            let loss = if composed {
                label_nll_composed(logits.clone(), targets.clone(), 11.0)
            } else {
                label_nll(logits.clone(), targets.clone(), 11.0)
            };
            assert_eq!((loss.dims(), loss.dtype()), ([1], DType::F32));
            let loss_values = f32_values(loss.clone());
            let counter = crate::LaunchCounter::start(device);
            // A scale on the loss, so that the upstream gradient is not 1.
            let grads = loss.mul_scalar(3.0).backward();
            let g = logits.grad(&grads).unwrap();
            assert_eq!(g.dtype(), dtype);
            let g = f32_values(g);
            let launches = counter.map_or_else(Vec::new, |c| c.by_kernel());
            (loss_values, g, launches)
        };
        let (loss, g, launches) = run(false);
        let (loss_ref, g_ref, _) = run(true);
        // The forward is the composed ops, in their order: the same bits (on the CubeCL
        // backends the sum runs over rows, one rounding apart).
        if crate::is_cpu(device) {
            assert_eq!(loss, loss_ref, "{dtype:?} loss");
        } else {
            assert!(max_rel_diff(&loss, &loss_ref) <= 1e-6, "{dtype:?} loss");
        }
        let d = max_rel_diff(&g, &g_ref);
        assert!(d <= tol, "{dtype:?}: logits grad {d} (tol {tol})");
        // The target entries carry the large negative gradient.
        assert!(g_ref.iter().any(|v| *v < -0.1));
        launches
    }

    #[test]
    fn the_gradient_matches_autodiff_through_the_composed_ops() {
        let device = Device::flex().autodiff();
        device.seed(11);
        check(&device, DType::F32, 1e-5);
        check(&device, DType::BF16, 2e-2);
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn the_gradient_matches_on_wgpu_in_one_kernel() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        device.seed(12);
        let launches = check(&device, DType::F32, 1e-5);
        // The loss's backward is one kernel; the scale on the loss adds its own.
        let named = |part: &str| crate::launches::launched_named(&launches, part);
        assert_eq!(named("LabelNll"), 1, "{launches:?}");
        assert_eq!(named("Scatter"), 0, "{launches:?}");
    }

    #[test]
    fn without_autodiff_the_op_is_the_composed_forward() {
        let device = Device::flex();
        device.seed(13);
        let logits = Tensor::<2>::random([5, 30], Distribution::Normal(0.0, 2.0), &device);
        let targets: Tensor<2, Int> =
            Tensor::from_data(TensorData::new(vec![1i64, 2, 29, 0, 2], [5, 1]), &device);
        assert_eq!(
            f32_values(label_nll(logits.clone(), targets.clone(), 4.0)),
            f32_values(label_nll_composed(logits, targets, 4.0))
        );
    }
}
