//! RMSNorm's one-pass CPU path for inference (see [`crate::cpu`] for the numerics).

use burn::tensor::Tensor;

use crate::cpu::{each_row, host, tensor, values};

/// transformers' `LlamaRMSNorm` of `x: [.., n]` with `weight: [n]`, in f32:
/// `(x · 1/sqrt(mean(x²) + eps)) · weight`, as engram-model's `RmsNorm` writes it in Burn ops
/// ([`crate::norm::rms_norm`]).
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

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::rms_norm;
    use crate::cpu::{bits, random};
    use crate::norm::rms_norm as rms_norm_ops;

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
        // Not on autodiff tensors (engram-model's `RmsNorm` calls this pass: its test compares the
        // module with the ops).
        let ad = Device::flex().autodiff();
        assert!(rms_norm(&random([1, 1, 8], 1.0, &ad), &random([8], 1.0, &ad), 1e-5).is_none());
    }
}
