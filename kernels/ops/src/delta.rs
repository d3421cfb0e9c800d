//! How an adapter's delta joins its base output, in PEFT's order: PEFT's `Linear.forward`
//! computes `result + lora_B(lora_A(dropout(x))) * scaling` with the product in the adapter's
//! dtype, where torch promotes a half-precision `result` to the f32 delta's dtype, and rounds
//! the sum to the base's dtype once (`result.to(torch_result_dtype)`). So: the product scaled in
//! its own dtype; where that differs from the base's, the sum formed in f32 and rounded to the
//! base's dtype once. (Rounding the delta to the base's dtype first and adding there, as engram
//! did before, is two roundings: at most one rounding step apart, on some elements.)
//!
//! The kernels that add deltas inside them (RoPE's q/k/v, SwiGLU's backward) form every sum in
//! f32 and round it once. Where base and product share a half dtype that is the native add's
//! result too: the f32 sum of two such values is exact unless one is below 2⁻¹³ of the other,
//! too small to move the rounding to the half type.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, binary};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, FloatDType, TensorMetadata, backend_extension};
use burn::tensor::Tensor;

use crate::cast::cast_to;
use crate::seam::autodiff_node;

/// `part + scale · delta` in PEFT's order (see the module docs), in `part`'s dtype.
pub fn add_delta<B: Backend>(
    part: FloatTensor<B>,
    delta: FloatTensor<B>,
    scale: f64,
) -> FloatTensor<B> {
    let dtype = part.dtype();
    let delta = B::float_mul_scalar(delta, scale.into());
    if delta.dtype() == dtype {
        return B::float_add(part, delta);
    }
    let f32 = |t| cast_to::<B>(t, FloatDType::F32);
    let sum = B::float_add(f32(part), f32(delta));
    cast_to::<B>(sum, FloatDType::from(dtype))
}

/// The gradient a delta gets through [`add_delta`] from the sum's gradient `d`: `d` cast to the
/// delta's dtype, then scaled — autograd's through PEFT's sum (the cast's backward, then the
/// scale's). The nodes that add deltas inside them ([`DeltaOp`], SwiGLU's, attention's) hand it
/// to their products.
pub(crate) fn delta_gradient<B: Backend>(
    d: FloatTensor<B>,
    delta_dtype: FloatDType,
    scale: f64,
) -> FloatTensor<B> {
    B::float_mul_scalar(cast_to::<B>(d, delta_dtype), scale.into())
}

/// [`add_delta`] as one backend operation. On the autodiff backend it is one node, whose
/// backward hands the sum's gradient to `part` as it is and to `delta` cast to its dtype and
/// scaled: what autograd forms through PEFT's sum (and Burn's autodiff through [`add_delta`]'s
/// ops), where a half-precision `part`'s gradient goes to f32 and back, exactly — a cast kernel
/// of its own on the GPU backends, for the same bits.
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait DeltaOp: Backend {
    /// `part + scale · delta` in PEFT's order, in `part`'s dtype ([`add_delta`]).
    fn add_scaled_delta(
        part: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        add_delta::<Self>(part, delta, scale)
    }
}

impl DeltaOp for burn::backend::Flex {}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl DeltaOp for burn::backend::Cube {}

#[derive(Debug)]
struct AddDeltaBackward {
    scale: f64,
}

impl<B: Backend> Backward<B, 2> for AddDeltaBackward {
    /// The delta's dtype.
    type State = FloatDType;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let delta_dtype = ops.state;
        binary::<B, _, _>(
            ops.parents,
            ops.node,
            grads,
            |d| d,
            |d| delta_gradient::<B>(d, delta_dtype, self.scale),
        );
    }
}

impl<B: Backend, C: CheckpointStrategy> DeltaOp for Autodiff<B, C> {
    fn add_scaled_delta(
        part: FloatTensor<Self>,
        delta: FloatTensor<Self>,
        scale: f64,
    ) -> FloatTensor<Self> {
        autodiff_node::<C, _, _, _, _>(
            AddDeltaBackward { scale },
            [part, delta],
            (),
            |[part, delta], ()| {
                let dtype = FloatDType::from(delta.dtype());
                (dtype, add_delta::<B>(part, delta, scale))
            },
            |[part, delta], ()| add_delta::<B>(part, delta, scale),
        )
    }
}

on_dispatch! {
    /// [`add_delta`] on tensors, in one autodiff node ([`DeltaOp`]): `part + scale · delta` in
    /// PEFT's order, in `part`'s dtype.
    pub fn add_delta_tensor<const D: usize>(
        part: Tensor<D>,
        delta: Tensor<D>,
        scale: f64,
    ) -> Tensor<D> => DeltaOp::add_scaled_delta;
}

/// [`add_delta`] on tensors in Burn's ops, which autodiff differentiates op by op: the reference
/// [`add_delta_tensor`]'s node is tested against, and what the self-checks' composed forms add
/// with.
pub fn add_delta_composed<const D: usize>(
    part: Tensor<D>,
    delta: Tensor<D>,
    scale: f64,
) -> Tensor<D> {
    Tensor::from_dispatch(add_delta::<burn::backend::Dispatch>(
        part.into_dispatch(),
        delta.into_dispatch(),
        scale,
    ))
}

/// The kernels' form: one element's sum.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) mod cube {
    use cubecl::prelude::*;

    /// `base + scaled` (an adapter's delta, already scaled in its own type `I`) formed in f32 and
    /// rounded to `F` once: [`super::add_delta`]'s order for one element.
    #[cube]
    pub fn add_scaled<F: Float, I: Float>(base: F, scaled: I) -> F {
        F::cast_from(f32::cast_from(base) + f32::cast_from(scaled))
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Device, Distribution, Tensor};

    use super::{add_delta_composed, add_delta_tensor};
    use crate::testing::f32_values;

    /// The gradients of `part` and `delta` (in `dtypes`) through `add` (scale 0.5) of a random
    /// weighted sum of its output, as f32 values.
    fn gradients(
        device: &Device,
        dtypes: (DType, DType),
        add: fn(Tensor<2>, Tensor<2>, f64) -> Tensor<2>,
    ) -> [Vec<f32>; 2] {
        device.seed(11);
        let draw = || Tensor::<2>::random([16, 48], Distribution::Normal(0.0, 4.0), device);
        let (part, delta, up) = (draw(), draw(), draw());
        let part = part.cast(dtypes.0).require_grad();
        let delta = delta.cast(dtypes.1).require_grad();
        let loss = (add(part.clone(), delta.clone(), 0.5).cast(DType::F32) * up).sum();
        let grads = loss.backward();
        [&part, &delta].map(|t| f32_values(t.grad(&grads).expect("a gradient")))
    }

    /// A bf16 base plus an f32 delta is PEFT's: the f32 sum rounded once — computed here on the
    /// host with `half`'s rounding — where rounding the delta first differs on some elements.
    #[test]
    fn a_half_base_plus_an_f32_delta_rounds_once_as_peft() {
        let device = Device::flex();
        device.seed(3);
        let base = Tensor::<2>::random([64, 64], Distribution::Normal(0.0, 100.0), &device)
            .cast(DType::BF16);
        let delta = Tensor::<2>::random([64, 64], Distribution::Normal(0.0, 3.0), &device);
        let got = f32_values(add_delta_tensor(base.clone(), delta.clone(), 0.5));
        let (b, d) = (f32_values(base), f32_values(delta));
        let once: Vec<f32> = b
            .iter()
            .zip(&d)
            .map(|(b, d)| half::bf16::from_f32(b + 0.5 * d).to_f32())
            .collect();
        assert_eq!(got, once);
        let twice = b
            .iter()
            .zip(&d)
            .filter(|(b, d)| {
                let rounded = half::bf16::from_f32(0.5 * **d);
                let sum = half::bf16::from_f32(**b + rounded.to_f32());
                sum.to_f32() != half::bf16::from_f32(**b + 0.5 * **d).to_f32()
            })
            .count();
        assert!(
            twice > 0,
            "the two orders agree everywhere: the test shows nothing"
        );
    }

    /// The node's gradients are autodiff's through the composed ops, bit for bit: `part`'s the
    /// sum's gradient as it is, `delta`'s cast to its dtype, then scaled.
    #[test]
    fn gradients_are_autodiffs_through_the_composed_ops() {
        let _rng = crate::testing::train_lock();
        let device = Device::flex().autodiff();
        for dtypes in [
            (DType::F32, DType::F32),
            (DType::BF16, DType::F32),
            (DType::BF16, DType::BF16),
            (DType::F32, DType::BF16),
        ] {
            let op = gradients(&device, dtypes, add_delta_tensor);
            let composed = gradients(&device, dtypes, add_delta_composed);
            assert_eq!(op, composed, "{dtypes:?}");
            assert!(
                op[1].iter().any(|v| *v != 0.0),
                "{dtypes:?}: a real gradient"
            );
        }
    }

    /// On wgpu, a projection's f16 base output plus its adapter's f32 product (f16 standing in
    /// for bf16): the node's backward hands the base its gradient as it is, where autodiff's
    /// cast it to f32 and back (a kernel of its own there), for the same gradients.
    #[cfg(feature = "wgpu")]
    #[test]
    fn on_wgpu_a_half_bases_gradient_takes_no_cast() {
        let _g = crate::testing::train_lock();
        let device = crate::testing::wgpu_training_device();
        device.seed(12);
        let draw =
            |shape: [usize; 2]| Tensor::<2>::random(shape, Distribution::Normal(0.0, 1.0), &device);
        let (x, w, a, b, up) = (
            draw([64, 32]).cast(DType::F16),
            draw([32, 48]).cast(DType::F16),
            draw([32, 4]),
            draw([4, 48]),
            draw([64, 48]),
        );
        let run = |add: fn(Tensor<2>, Tensor<2>, f64) -> Tensor<2>| {
            let x = x.clone().require_grad();
            let (a, b) = (a.clone().require_grad(), b.clone().require_grad());
            let product = x
                .clone()
                .cast(DType::F32)
                .matmul(a.clone())
                .matmul(b.clone());
            let y = add(x.clone().matmul(w.clone()), product, 0.5);
            let loss = (y.cast(DType::F32) * up.clone()).sum();
            loss.clone().into_data();
            let counter = crate::LaunchCounter::start(&device).unwrap();
            let grads = loss.backward();
            let values = [&x, &a, &b].map(|t| f32_values(t.grad(&grads).expect("a gradient")));
            (values, counter.launched(), counter.sequence())
        };
        // Once each first: the matmuls' autotuning launches candidates.
        run(add_delta_tensor);
        run(add_delta_composed);
        let (op, op_launches, op_seq) = run(add_delta_tensor);
        let (composed, composed_launches, composed_seq) = run(add_delta_composed);
        assert_eq!(op, composed);
        assert!(
            op_launches < composed_launches,
            "{op_launches} launches {op_seq:?}, composed {composed_launches} {composed_seq:?}"
        );
    }
}
