//! Inference's elementwise work on the CPU backend, one pass per op: RMSNorm, RoPE and the
//! SwiGLU product, each computed on the host values of a plain CPU-backend (flex, not autodiff)
//! f32 tensor.
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
fn each_row(out: &mut [f32], width: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    if out.len() >= PARALLEL_MIN_VALUES && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(width)
            .enumerate()
            .for_each(|(r, o)| f(r, o));
    } else {
        out.chunks_mut(width).enumerate().for_each(|(r, o)| f(r, o));
    }
}

/// transformers' `LlamaRMSNorm` of `x: [.., n]` with `weight: [n]`, in f32:
/// `(x · 1/sqrt(mean(x²) + eps)) · weight`, as [`crate::norm::RmsNorm`] writes it in Burn ops.
pub fn rms_norm<const D: usize>(x: &Tensor<D>, weight: &Tensor<1>, eps: f64) -> Option<Tensor<D>> {
    let (xt, wt) = (host(x)?, host(weight)?);
    let (xs, w) = (values(&xt), values(&wt));
    let n = w.len();
    let dims = x.dims();
    if dims[D - 1] != n || n == 0 {
        return None;
    }
    let eps = eps as f32;
    let mut out = vec![0f32; xs.len()];
    each_row(&mut out, n, |r, o| {
        let row = &xs[r * n..][..n];
        // flex's mean: the squares' row sum by its SIMD kernel, then a division.
        let squares: Vec<f32> = row.iter().map(|v| v * v).collect();
        let mut sum = [0f32];
        burn_flex::simd::kernels::sum_rows_f32(&squares, &mut sum, 1, n);
        let inv = 1.0 / (sum[0] / n as f32 + eps).sqrt();
        for ((o, v), g) in o.iter_mut().zip(row).zip(w) {
            *o = (v * inv) * g;
        }
    });
    Some(tensor(out, dims))
}

/// `x · cos + swap_halves(x) · sin` for `x: [batch, seq, heads, head_dim]` and [`crate::rope`]'s
/// tables (`[batch or 1, seq, 1, head_dim]`, `sin` signed), as [`crate::rope::apply_rotary`]
/// writes it in Burn ops.
pub fn rotary(x: &Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Option<Tensor<4>> {
    let [b, t, h, d] = x.dims();
    let [cb, ct, ch, cd] = cos.dims();
    if sin.dims() != cos.dims() || (cb != b && cb != 1) || ct != t || ch != 1 || cd != d {
        return None;
    }
    let (xt, ct, st) = (host(x)?, host(cos)?, host(sin)?);
    let (xs, cos, sin) = (values(&xt), values(&ct), values(&st));
    let half = d / 2;
    let mut out = vec![0f32; xs.len()];
    // One output row per (batch, position): its heads share a row of the tables.
    each_row(&mut out, h * d, |r, o| {
        let (bi, s) = (r / t, r % t);
        let table = (if cb == 1 { s } else { bi * t + s }) * d;
        let (c, sn) = (&cos[table..][..d], &sin[table..][..d]);
        for (head, oh) in o.chunks_exact_mut(d).enumerate() {
            let xh = &xs[(r * h + head) * d..][..d];
            for (i, v) in oh.iter_mut().enumerate() {
                let swapped = xh[if i < half { i + half } else { i - half }];
                *v = xh[i] * c[i] + swapped * sn[i];
            }
        }
    });
    Some(tensor(out, [b, t, h, d]))
}

/// `silu(gate) · up` for two tensors of one shape, as [`crate::mlp::Mlp`] writes it in Burn
/// ops (`silu(g) = g · sigmoid(g)`, by flex's sigmoid formula), eight values at a time
/// ([`engram_kernels::silu_mul`]).
pub fn swiglu<const D: usize>(gate: &Tensor<D>, up: &Tensor<D>) -> Option<Tensor<D>> {
    let dims = gate.dims();
    if up.dims() != dims {
        return None;
    }
    let (gt, ut) = (host(gate)?, host(up)?);
    let (g, u) = (values(&gt), values(&ut));
    let width = dims[D - 1].max(1);
    let mut out = vec![0f32; g.len()];
    each_row(&mut out, width, |r, o| {
        let (gr, ur) = (&g[r * width..][..width], &u[r * width..][..width]);
        engram_kernels::silu_mul(gr, ur, o);
    });
    Some(tensor(out, dims))
}

#[cfg(test)]
mod tests {
    use burn::tensor::activation::silu;
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::norm::{RmsNorm, rms_norm_ops};
    use crate::rope::{apply_rotary, rotary_ops};

    fn bits<const D: usize>(t: Tensor<D>) -> Vec<u32> {
        let v = t.into_data().try_into_vec_as::<f32>().unwrap();
        v.iter().map(|f| f.to_bits()).collect()
    }

    fn random<const D: usize>(shape: [usize; D], scale: f64, device: &Device) -> Tensor<D> {
        Tensor::random(shape, Distribution::Normal(0.0, scale), device)
    }

    #[test]
    fn rms_norm_gives_burns_bits() {
        let device = Device::flex();
        device.seed(3);
        // A decode row, a batch, and a prompt long enough to split over threads; widths that
        // are and are not multiples of the SIMD width.
        for (shape, n) in [([1, 1], 576), ([16, 1], 576), ([3, 700], 64), ([2, 5], 37)] {
            let x = random([shape[0], shape[1], n], 2.0, &device);
            let w = random([n], 1.0, &device);
            let got = rms_norm(&x, &w, 1e-5).expect("applies on the CPU backend");
            assert_eq!(bits(got), bits(rms_norm_ops(x, w, 1e-5)), "{shape:?} × {n}");
        }
        // The module itself, and not on autodiff tensors.
        let x = random([2, 3, 64], 1.0, &device);
        let norm = RmsNorm::new(random([64], 1.0, &device), 1e-6);
        let want = rms_norm_ops(x.clone(), norm.weight.val(), 1e-6);
        assert_eq!(bits(norm.forward(x)), bits(want));
        let ad = Device::flex().autodiff();
        assert!(rms_norm(&random([1, 1, 8], 1.0, &ad), &random([8], 1.0, &ad), 1e-5).is_none());
    }

    #[test]
    fn rotary_gives_burns_bits() {
        let device = Device::flex();
        device.seed(4);
        let (b, t, h, d) = (3, 5, 4, 16);
        let x = random([b, t, h, d], 1.0, &device);
        // Shared tables ([1, t, 1, d]) and per-row ones ([b, t, 1, d]).
        for cb in [1, b] {
            let (cos, sin) = (
                random([cb, t, 1, d], 1.0, &device),
                random([cb, t, 1, d], 1.0, &device),
            );
            let got = rotary(&x, &cos, &sin).expect("applies on the CPU backend");
            let want = bits(rotary_ops(x.clone(), &cos, &sin));
            assert_eq!(bits(got), want, "{cb}");
            assert_eq!(bits(apply_rotary(x.clone(), &cos, &sin)), want, "{cb}");
        }
        let bad = random([1, t + 1, 1, d], 1.0, &device);
        assert!(rotary(&x, &bad, &bad).is_none(), "tables of another length");
    }

    #[test]
    fn swiglu_gives_burns_bits() {
        let device = Device::flex();
        device.seed(5);
        // Values of both signs and large ones (exp overflowing on either side).
        for shape in [[1, 1, 1536], [4, 9, 1536]] {
            let g = random(shape, 30.0, &device);
            let u = random(shape, 1.0, &device);
            let got = swiglu(&g, &u).expect("applies on the CPU backend");
            assert_eq!(bits(got), bits(silu(g) * u), "{shape:?}");
        }
    }
}
