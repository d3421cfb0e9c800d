//! The rows of the hidden states that predict a label, picked as one operation whose backward
//! knows each row is picked at most once (a Burn backend extension).
//!
//! Burn's `select` differentiates to a zero tensor of the input's shape and a scatter-add of the
//! picked rows' gradient into it (a fill and a `select_assign`, two kernels on the GPU
//! backends), since its indices may repeat. The loss picks each hidden state at most once, so
//! the input's gradient row `r` is the picked gradient's row `inverse[r]`, or zero where `r` is
//! not picked: one gather, one kernel on the CubeCL backends (its `cube.rs`).
//! The forward is Burn's `select` (which fusion folds into the kernel that reads it); the
//! gradient is the same, exactly, as `select`'s.

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, unary};
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend, TensorMetadata, backend_extension};
use burn::tensor::{IndexingUpdateOp, Int, Shape, Tensor};

use crate::seam::autodiff_node;

/// Picking rows that are each picked at most once (see the module docs).
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait PickRowsOp: Backend {
    /// Rows `at` (`[n]`) of `x` (`[rows, h]`): `[n, h]`. `inverse` (`[rows]`) holds, for each
    /// row of `x`, its place in `at`, or `n` where it is not picked.
    fn pick_rows(
        x: FloatTensor<Self>,
        at: IntTensor<Self>,
        inverse: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        let _ = inverse;
        Self::float_select(x, 0, at)
    }

    /// The gradient of [`PickRowsOp::pick_rows`]'s `x` from the picked rows' `g` (`[n, h]`):
    /// `[rows, h]`, row `r` being `g`'s row `inverse[r]`, or zeros.
    fn pick_rows_backward(
        g: FloatTensor<Self>,
        at: IntTensor<Self>,
        inverse: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        backward_composed::<Self>(g, at, inverse)
    }
}

/// [`PickRowsOp::pick_rows_backward`] as Burn differentiates `select`: zeros and a scatter-add.
fn backward_composed<B: Backend>(
    g: FloatTensor<B>,
    at: IntTensor<B>,
    inverse: IntTensor<B>,
) -> FloatTensor<B> {
    let rows = inverse.shape()[0];
    let h = g.shape()[1];
    let zeros = B::float_zeros(Shape::from([rows, h]), &g.device(), g.dtype().into());
    B::float_select_assign(zeros, 0, at, g, IndexingUpdateOp::Add)
}

impl PickRowsOp for burn::backend::Flex {}

/// On the CubeCL backends the backward is one kernel (its `cube.rs`).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl PickRowsOp for burn::backend::Cube {
    fn pick_rows_backward(
        g: FloatTensor<Self>,
        at: IntTensor<Self>,
        inverse: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        if crate::pick_rows::cube::supported(&g, &inverse) {
            crate::pick_rows::cube::backward(g, inverse)
        } else {
            backward_composed::<Self>(g, at, inverse)
        }
    }
}

#[derive(Debug)]
struct PickRowsBackward;

impl<B: Backend + PickRowsOp> Backward<B, 1> for PickRowsBackward {
    /// The picked rows and the inverse.
    type State = (IntTensor<B>, IntTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (at, inverse) = ops.state;
        unary::<B, _>(ops.parents, ops.node, grads, |g| {
            B::pick_rows_backward(g, at, inverse)
        });
    }
}

impl<B: Backend + PickRowsOp, C: CheckpointStrategy> PickRowsOp for Autodiff<B, C> {
    fn pick_rows(
        x: FloatTensor<Self>,
        at: IntTensor<Self>,
        inverse: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        autodiff_node::<C, _, _, _, _>(
            PickRowsBackward,
            [x],
            (at, inverse),
            |[x], (at, inverse)| {
                let picked = B::pick_rows(x, at.clone(), inverse.clone());
                ((at, inverse), picked)
            },
            |[x], (at, inverse)| B::pick_rows(x, at, inverse),
        )
    }
}

/// The places in `at` of each of `rows` rows, `rows` long: `at`'s index of row `r`, or `at`'s
/// length where `r` is not picked. `at` must pick each row at most once.
pub fn inverse_rows(at: &[i64], rows: usize) -> Vec<i64> {
    let mut inverse = vec![at.len() as i64; rows];
    for (i, &r) in at.iter().enumerate() {
        let slot = &mut inverse[r as usize];
        assert_eq!(*slot, at.len() as i64, "row {r} is picked twice");
        *slot = i as i64;
    }
    inverse
}

on_dispatch! {
    /// [`PickRowsOp::pick_rows`] on tensors, in one autodiff node: rows `at` of `x`, each picked at
    /// most once; `inverse` is [`inverse_rows`] of `at` on the device.
    pub fn pick_rows(
        x: Tensor<2>,
        at: Tensor<1, Int>,
        inverse: Tensor<1, Int>,
    ) -> Tensor<2> => PickRowsOp::pick_rows;
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Distribution, Int, Tensor, TensorData};

    use crate::testing::f32_values;

    use super::{inverse_rows, pick_rows};

    /// The op's rows and its input's gradient against `select`'s, for `x` in `dtype`, with
    /// rows picked out of order and some not at all; returns the kernels the backward launched
    /// (on a CubeCL device; empty elsewhere).
    fn check(device: &Device, dtype: DType) -> Vec<(String, u64)> {
        let (rows, h) = (9, 5);
        let picks = vec![7i64, 0, 3, 4, 8];
        let x0 = Tensor::<2>::random([rows, h], Distribution::Normal(0.0, 1.0), device);
        let weight = Tensor::<2>::random([picks.len(), h], Distribution::Normal(0.0, 1.0), device);
        let at = || -> Tensor<1, Int> {
            Tensor::from_data(TensorData::new(picks.clone(), [picks.len()]), device)
        };
        let inverse: Tensor<1, Int> =
            Tensor::from_data(TensorData::new(inverse_rows(&picks, rows), [rows]), device);
        let run = |op: bool| {
            let x = x0.clone().cast(dtype).require_grad();
            let picked = if op {
                pick_rows(x.clone(), at(), inverse.clone())
            } else {
                x.clone().select(0, at())
            };
            let values = f32_values(picked.clone());
            let counter = crate::LaunchCounter::start(device);
            let grads = (picked.cast(DType::F32) * weight.clone()).sum().backward();
            let g = x.grad(&grads).unwrap();
            assert_eq!(g.dtype(), dtype);
            let g = f32_values(g);
            (values, g, counter.map_or_else(Vec::new, |c| c.by_kernel()))
        };
        let (values, g, launches) = run(true);
        let (values_ref, g_ref, _) = run(false);
        assert_eq!(values, values_ref, "{dtype:?} rows");
        assert_eq!(g, g_ref, "{dtype:?} gradient");
        // Rows not picked get a zero gradient, the others a real one.
        for r in 0..rows {
            let row = &g[r * h..(r + 1) * h];
            assert_eq!(row.iter().all(|v| *v == 0.0), !picks.contains(&(r as i64)));
        }
        launches
    }

    #[test]
    fn inverse_places_each_picked_row() {
        assert_eq!(inverse_rows(&[3, 0, 1], 5), vec![1, 2, 3, 0, 3]);
        assert_eq!(inverse_rows(&[], 2), vec![0, 0]);
    }

    #[test]
    #[should_panic(expected = "row 1 is picked twice")]
    fn a_row_picked_twice_is_refused() {
        inverse_rows(&[1, 2, 1], 3);
    }

    #[test]
    fn the_gradient_is_selects_on_the_cpu() {
        let device = Device::flex().autodiff();
        device.seed(21);
        check(&device, DType::F32);
        check(&device, DType::BF16);
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn the_gradient_is_selects_on_wgpu_in_one_kernel_in_f32_and_f16() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        device.seed(22);
        // f16 stands in for bf16, which WGSL lacks: the kernel's code is generic over both.
        for dtype in [DType::F32, DType::F16] {
            let launches = check(&device, dtype);
            let named = |part: &str| crate::launches::launched_named(&launches, part);
            assert_eq!(named("PickRows"), 1, "{dtype:?}: {launches:?}");
            // (The test's own sum and its backward fill too.)
            assert_eq!(named("SelectAssign"), 0, "{dtype:?}: {launches:?}");
        }
    }
}
