//! Inference's elementwise work on the CPU backend, one pass per op — RMSNorm
//! ([`crate::norm::cpu`]), RoPE ([`crate::rope::cpu`]) and the SwiGLU product
//! ([`crate::swiglu::cpu`]) — each computed on the host values of a plain CPU-backend (flex, not
//! autodiff) f32 tensor; here, what they share.
//!
//! Burn runs each tensor op as its own kernel with its own output allocation: RMSNorm is seven
//! (square, row sum, divide, add ε, sqrt, reciprocal, two products), RoPE five (a flip and four
//! products and sums), SwiGLU three. A batch-1 decode step's tensors are one row of a few
//! hundred values, so there the ops' fixed cost, not their arithmetic, is what these layers
//! take: with q8 products, a sixth of a SmolLM2 decode step went outside the products and the
//! attention. Here each of the three is one loop over the values and one allocation.
//!
//! Numerics: the same f32 operations in the same order as Burn's ops on the CPU backend, so the
//! same bits (the tests compare them with the Burn expressions the modules write): RMSNorm's
//! row sum is flex's own SIMD row-sum kernel, every other value is computed element by element
//! as flex does (no fused multiply-add, flex's sigmoid formula; its `exp` is
//! engram-kernels' port (`kernels/src/exp.rs`) of glibc's `expf`, the `exp` flex calls on glibc systems, bit
//! for bit).
//!
//! Each function returns `None` where it does not apply (autodiff tensors, GPU backends, other
//! dtypes); the caller then runs the Burn ops.

use burn::tensor::{DType, Tensor, TensorData};
use burn_flex::{Flex, FlexTensor};
use rayon::prelude::*;

/// Values from which a pass is split over rayon's threads (by whole rows, so the bits do not
/// depend on the split): a long prompt's activations, not a decode step's.
const PARALLEL_MIN_VALUES: usize = 1 << 15;

/// The host tensor behind `t` if it is an f32 tensor of the plain CPU backend (as it lies,
/// strided or not).
pub(crate) fn host_f32<const D: usize>(t: &Tensor<D>) -> Option<FlexTensor> {
    if t.dtype() != DType::F32 {
        return None;
    }
    t.clone().try_into_primitive::<Flex>().ok()
}

/// [`host_f32`], contiguous (a strided view is copied).
pub(crate) fn host<const D: usize>(t: &Tensor<D>) -> Option<FlexTensor> {
    let t = host_f32(t)?;
    Some(if t.layout().is_contiguous() {
        t
    } else {
        t.to_contiguous()
    })
}

/// The values of a contiguous host tensor.
pub(crate) fn values(t: &FlexTensor) -> &[f32] {
    let (start, end) = t
        .layout()
        .contiguous_offsets()
        .expect("a contiguous tensor has contiguous offsets");
    &t.storage::<f32>()[start..end]
}

/// A host f32 tensor of `shape` holding `v`.
pub(crate) fn tensor<const D: usize>(v: Vec<f32>, shape: [usize; D]) -> Tensor<D> {
    Tensor::from_primitive::<Flex>(FlexTensor::from_data(TensorData::new(v, shape)))
}

/// `f(row index, output row)` over the rows of `out` (each `width` values), on rayon's threads
/// when there are many values.
pub(crate) fn each_row(out: &mut [f32], width: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    if out.len() >= PARALLEL_MIN_VALUES && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(width)
            .enumerate()
            .for_each(|(r, o)| f(r, o));
    } else {
        out.chunks_mut(width).enumerate().for_each(|(r, o)| f(r, o));
    }
}

/// The bits of a tensor's f32 values (tests compare the passes with Burn's ops bit for bit).
#[cfg(test)]
pub(crate) fn bits<const D: usize>(t: Tensor<D>) -> Vec<u32> {
    let v = t.into_data().try_into_vec_as::<f32>().unwrap();
    v.iter().map(|f| f.to_bits()).collect()
}

/// A tensor of normal values with standard deviation `scale`.
#[cfg(test)]
pub(crate) fn random<const D: usize>(
    shape: [usize; D],
    scale: f64,
    device: &burn::tensor::Device,
) -> Tensor<D> {
    Tensor::random(
        shape,
        burn::tensor::Distribution::Normal(0.0, scale),
        device,
    )
}
