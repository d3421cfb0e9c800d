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

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, FloatDType, TensorMetadata};
use burn::tensor::{DType, Tensor};

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
    let f32 = |t: FloatTensor<B>| {
        if t.dtype() == DType::F32 {
            t
        } else {
            B::float_cast(t, FloatDType::F32)
        }
    };
    let sum = B::float_add(f32(part), f32(delta));
    if dtype == DType::F32 {
        sum
    } else {
        B::float_cast(sum, FloatDType::from(dtype))
    }
}

/// [`add_delta`] on tensors: `part + scale · delta` in PEFT's order, in `part`'s dtype.
pub fn add_delta_tensor<const D: usize>(
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

    use super::add_delta_tensor;
    use crate::testing::f32_values;

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
}
