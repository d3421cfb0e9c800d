//! Inference products on the CPU backend through [`engram_kernels`]' `x · wᵀ` kernels.
//!
//! A decode step multiplies a few rows by every weight matrix, so on the CPU it is bound by how
//! fast the weights reach the arithmetic units. Burn's CPU matmul (the `gemm` crate) packs the
//! `[in, out]` weight into panels on every call and walks it with a large stride. engram's
//! kernel instead reads weights in the `[out, in]` layout checkpoints store, row by row, and
//! where the checkpoint stored them in GGUF blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
//! Q6_K) it reads the blocks themselves, dequantizing a few rows at a time into cache:
//! SmolLM2's Q4_1 weights stream at 5/32 of their f32 size. `engram bench generate` measures the
//! effect against transformers and llama.cpp.
//!
//! How it is wired:
//! - On the CPU device (flex, with or without autodiff) with f32 weights and an AVX2 + FMA +
//!   F16C CPU ([`keeps_blocks`]), the loader keeps each quantized projection's blocks beside its
//!   f32 weight (engram-model's `Linear::quantized`, `Llama::embed_quantized`
//!   for a tied head): +16 % memory for SmolLM2's Q4_1 file.
//! - [`matmul_nt_quantized`] and [`matmul_nt`] run the kernel when the input is a
//!   plain (not autodiff) host f32 tensor with at most [`MAX_ROWS`] rows; otherwise they return
//!   `None` and the caller uses Burn's matmul (prefill chunks, training, GPUs, bf16).
//! - A tied head's f32 embedding `[vocab, hidden]` is already `[out, in]`: [`matmul_nt`] reads
//!   it as it is.
//!
//! Numerics: the blocks hold exactly the f32 weight's values (the f32 weight is their
//! dequantization, by the same code), and every output is an f32 dot product accumulated in 8
//! lanes with fused multiply-adds: a different summation order from transformers' BLAS, as any
//! two GEMMs differ. The parity tests hold it to the same tolerance as the rest of the model.

use std::cell::Cell;

use burn::tensor::{DType, Device, Tensor};
use engram_kernels::QuantizedMatrix;
use serde::{Deserialize, Serialize};

use crate::cpu::{host, host_f32, tensor, values};

/// Rows (batch × new tokens) up to which products run on the kernel. Measured with cold weights
/// on SmolLM2's shapes (2 cores), the f32 kernel against the `gemm` crate on the same `[out, in]`
/// weights: 1.5× at 16 rows, 1.4× at 64, even at 128; beyond that GEMM's packing pays off (and
/// Burn's `[in, out]` layout, which prefill uses, is itself faster there).
pub const MAX_ROWS: usize = 64;

/// Rows up to which [`QuantizedProduct::Q8`] multiplies through Q8 activations; larger
/// products run exact, which amortizes each dequantized weight row over many activation rows
/// and measured faster there (SmolLM2 Q4_1, 2 threads: batch-16 decode 155–212 tok/s through Q8
/// vs 218–287 exact; batch 1: 67–84 vs 47).
pub const Q8_MAX_ROWS: usize = 4;

/// How products with quantized blocks are computed on the CPU (`"exact"` or `"q8"` in a
/// configuration file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantizedProduct {
    /// The blocks dequantized to f32 and multiplied in f32: exactly the product with the
    /// dequantized weight (transformers' numbers; the parity tests' setting).
    #[default]
    Exact,
    /// Activations quantized to Q8 blocks and integer dot products with the weight blocks, as
    /// llama.cpp does (`engram_kernels::matmul_nt_q8`), for products of up to
    /// [`Q8_MAX_ROWS`] rows (decode at small batches); faster there, and an approximation.
    Q8,
}

impl QuantizedProduct {
    /// The name, as on the command line (`--matmul`): `exact`, `q8`.
    pub fn name(self) -> &'static str {
        match self {
            QuantizedProduct::Exact => "exact",
            QuantizedProduct::Q8 => "q8",
        }
    }

    /// Whether this is [`QuantizedProduct::Exact`] (the default, which configuration hashes
    /// leave out).
    pub fn is_exact(&self) -> bool {
        *self == QuantizedProduct::Exact
    }
}

thread_local! {
    /// The calling thread's [`QuantizedProduct`]: a product is decided on the thread that asks
    /// for it (rayon's threads only run its pieces), so threads answering side by side — tests,
    /// a server — do not see each other's setting.
    static QUANTIZED_PRODUCT: Cell<QuantizedProduct> = const { Cell::new(QuantizedProduct::Exact) };
}

/// Sets how the calling thread multiplies by quantized blocks on the CPU (until set again; see
/// [`ProductScope`] for a setting that ends with a scope).
pub fn set_quantized_product(p: QuantizedProduct) {
    QUANTIZED_PRODUCT.with(|c| c.set(p));
}

/// How the calling thread multiplies by quantized blocks on the CPU ([`QuantizedProduct::Exact`]
/// until set).
pub fn quantized_product() -> QuantizedProduct {
    QUANTIZED_PRODUCT.with(Cell::get)
}

/// A [`QuantizedProduct`] for the calling thread while it lives; the previous one comes back
/// when it drops (engram-model's `generate` holds one for each generation).
#[must_use = "the setting ends when the scope drops"]
pub struct ProductScope {
    previous: QuantizedProduct,
}

impl ProductScope {
    /// Sets `p` for the calling thread until the returned scope drops.
    pub fn set(p: QuantizedProduct) -> Self {
        let previous = quantized_product();
        set_quantized_product(p);
        Self { previous }
    }
}

impl Drop for ProductScope {
    fn drop(&mut self) {
        set_quantized_product(self.previous);
    }
}

/// Whether the loader keeps quantized blocks for the kernel on `device` with weights in
/// `dtype`: the CPU device, f32, and a CPU with the kernel's SIMD.
pub fn keeps_blocks(device: &Device, dtype: DType) -> bool {
    crate::is_cpu(device) && dtype == DType::F32 && engram_kernels::simd_available()
}

/// `x[.., k] · wᵀ` for a contiguous f32 `w: [n, k]` (a tied embedding as the language-model
/// head); `None` where the kernel does not apply.
pub fn matmul_nt<const D: usize>(x: &Tensor<D>, w: &Tensor<2>) -> Option<Tensor<D>> {
    let w = host_f32(w)?;
    let (start, end) = w.layout().contiguous_offsets()?;
    let [n, k] = w.layout().shape().dims::<2>();
    product(
        x,
        Weights::F32(&w.storage::<f32>()[start..end], k, n),
        quantized_product(),
    )
}

/// `x[.., k] · wᵀ` for a quantized `w: [n, k]` (a projection's `[out, in]` weight, or a tied
/// embedding, kept in blocks); `None` where the kernel does not apply.
pub fn matmul_nt_quantized<const D: usize>(
    x: &Tensor<D>,
    w: &QuantizedMatrix,
) -> Option<Tensor<D>> {
    product(x, Weights::Blocks(w), quantized_product())
}

/// A right-hand side `[n, k]` for the kernel.
enum Weights<'a> {
    /// Row-major f32 values, `k`, `n`.
    F32(&'a [f32], usize, usize),
    /// Quantized blocks.
    Blocks(&'a QuantizedMatrix),
}

/// `x[.., k] · wᵀ` through the kernel, or `None` (see the module docs).
fn product<const D: usize>(
    x: &Tensor<D>,
    w: Weights<'_>,
    mode: QuantizedProduct,
) -> Option<Tensor<D>> {
    let (k, n) = match w {
        Weights::F32(_, k, n) => (k, n),
        Weights::Blocks(q) => (q.cols(), q.rows()),
    };
    let dims = x.dims();
    if dims[D - 1] != k || !engram_kernels::simd_available() {
        return None;
    }
    let rows = dims[..D - 1].iter().product::<usize>();
    if rows > MAX_ROWS {
        return None;
    }
    let x = host(x)?;
    let xs = values(&x);
    let y = match w {
        Weights::F32(w, k, n) => engram_kernels::matmul_nt(xs, w, rows, k, n),
        Weights::Blocks(q) => match mode {
            QuantizedProduct::Exact => engram_kernels::matmul_nt_quantized(xs, q, rows),
            QuantizedProduct::Q8 if rows <= Q8_MAX_ROWS => {
                engram_kernels::matmul_nt_q8(xs, q, rows)
            }
            QuantizedProduct::Q8 => engram_kernels::matmul_nt_quantized(xs, q, rows),
        },
    };
    let mut out = dims;
    out[D - 1] = n;
    Some(tensor(y, out))
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;
    use engram_kernels::BlockFormat;

    use super::*;

    fn ramp_on(shape: [usize; 2], scale: f32, device: &Device) -> Tensor<2> {
        let n = shape[0] * shape[1];
        let v: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * scale)
            .collect();
        Tensor::from_data(TensorData::new(v, shape), device)
    }

    fn ramp(shape: [usize; 2], scale: f32) -> Tensor<2> {
        ramp_on(shape, scale, &Device::flex())
    }

    fn max_diff(a: Tensor<3>, b: Tensor<3>) -> f32 {
        (a - b).abs().max().into_scalar::<f32>()
    }

    /// A `[48, 64]` Q8_0 matrix (scale 1/64, bytes cycling through -100..100).
    fn q8_matrix() -> QuantizedMatrix {
        let mut data = Vec::new();
        for b in 0..48 * 2 {
            data.extend(half::f16::from_f32(1.0 / 64.0).to_bits().to_le_bytes());
            data.extend(
                (0..32)
                    .map(|j: i32| (b * 7 + j * 13) % 201 - 100)
                    .map(|q| q as i8 as u8),
            );
        }
        QuantizedMatrix::new(BlockFormat::Q8_0, 48, 64, data).unwrap()
    }

    #[test]
    fn quantized_linear_matches_burns_matmul_on_the_dequantized_weight() {
        if !engram_kernels::simd_available() {
            return;
        }
        let q = q8_matrix();
        let w_out_in =
            Tensor::<2>::from_data(TensorData::new(q.to_f32(), [48, 64]), &Device::flex());
        let x = ramp([6, 64], 0.02).reshape([2, 3, 64]);
        let fast = matmul_nt_quantized(&x, &q).expect("kernel applies");
        assert_eq!(fast.dims(), [2, 3, 48]);
        let slow = x.clone().matmul(w_out_in.transpose().unsqueeze());
        assert!(max_diff(fast, slow) < 1e-5);
        // Not for autodiff tensors, nor for more rows than MAX_ROWS.
        let ad = Device::flex().autodiff();
        assert!(matmul_nt_quantized(&ramp_on([3, 64], 0.02, &ad).unsqueeze::<3>(), &q).is_none());
        assert!(
            matmul_nt_quantized(&ramp([MAX_ROWS + 1, 64], 0.02).unsqueeze::<3>(), &q).is_none()
        );
    }

    #[test]
    fn q8_products_run_through_q8_activations_up_to_q8_max_rows_and_exact_beyond() {
        if !engram_kernels::simd_available() {
            return;
        }
        let q = q8_matrix();
        for rows in [1, Q8_MAX_ROWS, Q8_MAX_ROWS + 1] {
            let x = ramp([rows, 64], 0.02);
            let xs = x.to_data().try_to_vec::<f32>().unwrap();
            let got = product(
                &x.unsqueeze::<3>(),
                Weights::Blocks(&q),
                QuantizedProduct::Q8,
            )
            .unwrap()
            .to_data()
            .try_to_vec::<f32>()
            .unwrap();
            let want = if rows <= Q8_MAX_ROWS {
                engram_kernels::matmul_nt_q8(&xs, &q, rows)
            } else {
                engram_kernels::matmul_nt_quantized(&xs, &q, rows)
            };
            assert_eq!(got, want, "{rows} rows");
        }
    }

    #[test]
    fn matmul_nt_accepts_strided_rows_and_matches_burn() {
        if !engram_kernels::simd_available() {
            return;
        }
        let e = ramp([50, 16], 0.03);
        // A non-contiguous x (a transposed view) is copied to rows first.
        let x = ramp([16, 4], 0.05).transpose().unsqueeze::<3>();
        let fast = matmul_nt(&x, &e).expect("kernel applies");
        let slow = x.clone().matmul(e.clone().transpose().unsqueeze());
        assert!(max_diff(fast, slow) < 1e-5);
        assert!(
            matmul_nt(&x, &e.transpose()).is_none(),
            "a strided weight is not [n, k]"
        );
    }

    #[test]
    fn the_setting_belongs_to_the_thread_and_a_scope_restores_it() {
        assert_eq!(quantized_product(), QuantizedProduct::Exact);
        {
            let _q8 = ProductScope::set(QuantizedProduct::Q8);
            assert_eq!(quantized_product(), QuantizedProduct::Q8);
            let other = std::thread::spawn(quantized_product).join().unwrap();
            assert_eq!(
                other,
                QuantizedProduct::Exact,
                "another thread keeps its own"
            );
            {
                let _exact = ProductScope::set(QuantizedProduct::Exact);
                assert_eq!(quantized_product(), QuantizedProduct::Exact);
            }
            assert_eq!(
                quantized_product(),
                QuantizedProduct::Q8,
                "nested scopes unwind"
            );
        }
        assert_eq!(quantized_product(), QuantizedProduct::Exact);
        // As a configuration value.
        let q8: QuantizedProduct = serde_json::from_str("\"q8\"").unwrap();
        assert_eq!(q8, QuantizedProduct::Q8);
        let err = serde_json::from_str::<QuantizedProduct>("\"q4\"").unwrap_err();
        assert!(err.to_string().contains("q4"), "{err}");
    }

    #[test]
    fn blocks_are_kept_on_the_cpu_in_f32_only() {
        let simd = engram_kernels::simd_available();
        assert_eq!(keeps_blocks(&Device::flex(), DType::F32), simd);
        assert_eq!(keeps_blocks(&Device::flex().autodiff(), DType::F32), simd);
        assert!(!keeps_blocks(&Device::flex(), DType::BF16));
    }
}
