//! `y = x · wᵀ` with quantized weights the way llama.cpp computes it on the CPU: each row of `x`
//! quantized once to Q8 blocks (32 values, an f32 scale `d = max|x| / 127`, values rounded
//! half away from zero, as GGML's `quantize_row_q8_1` reference), then integer dot products
//! with the weight blocks — no float conversion per weight, a quarter of the bytes of f32
//! activations — and f32 only at each block's scale:
//!
//! - Q4_0 (`w = (q - 8)·d`) and Q8_0 (`w = q·d`): `Σ w·x ≈ d_w·d_x · Σ q_w·q_x`;
//! - Q4_1 (`w = q·d + m`): `d_w·d_x · Σ q_w·q_x + m · (d_x · Σ q_x)`.
//!
//! This is an approximation of the f32 product (the activations lose precision to 8 bits per
//! block), which [`crate::matmul_nt_quantized`] computes exactly; the callers decide which one
//! runs. Its error is measured against the f32 path in the tests.
//!
//! Each block's 32 products are summed in 8 integer lanes of 4 (what AVX2's `maddubs` +
//! `madd` give); each lane is converted to f32, multiplied by the block's scale and added to
//! its lane's f32 accumulator (a multiply then an add, never fused), and the 8 lanes are summed
//! in a fixed order at the end, after which the Q4_1 minimum terms (summed block by block)
//! are added. The AVX2 path and the portable path do exactly these operations, so their
//! results are bit-identical (the tests check it).

use crate::blocks::{BLOCK_ELEMS, BlockFormat, QuantizedMatrix, f16_at};
use crate::matmul_nt::{OutPtr, column_chunks};

/// Integer lanes per block (each the sum of 4 products).
const LANES: usize = 8;
/// Activation rows per call of the row kernels (their accumulators live on the stack).
const ROWS: usize = crate::matmul_nt::ROW_BLOCK;

/// Rows of activations quantized to Q8 blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct Q8Rows {
    /// Blocks per row.
    blocks: usize,
    /// Each block's scale.
    d: Vec<f32>,
    /// Each block's `d · Σ q` (Q8_1's `s`).
    s: Vec<f32>,
    /// The values, 32 a block.
    q: Vec<i8>,
}

impl Q8Rows {
    /// Quantizes `x[m, k]` (`k` a multiple of 32).
    ///
    /// # Panics
    /// If `x` does not hold `m · k` values or `k` is not a whole number of blocks.
    pub fn quantize(x: &[f32], m: usize, k: usize) -> Self {
        assert!(
            k.is_multiple_of(BLOCK_ELEMS) && x.len() == m * k,
            "Q8 rows: {} values are not {m} rows of {k} (a multiple of {BLOCK_ELEMS})",
            x.len()
        );
        let n = m * k / BLOCK_ELEMS;
        let (mut d, mut s, mut q) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            vec![0i8; m * k],
        );
        for (xb, qb) in x
            .chunks_exact(BLOCK_ELEMS)
            .zip(q.chunks_exact_mut(BLOCK_ELEMS))
        {
            let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let scale = amax / 127.0;
            let inv = if scale != 0.0 { 1.0 / scale } else { 0.0 };
            let mut sum = 0i32;
            for (v, o) in xb.iter().zip(qb.iter_mut()) {
                *o = (v * inv).round() as i8;
                sum += *o as i32;
            }
            d.push(scale);
            s.push(scale * sum as f32);
        }
        Self {
            blocks: k / BLOCK_ELEMS,
            d,
            s,
            q,
        }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.d.len() / self.blocks.max(1)
    }
}

/// `x[m, k] · w[n, k]ᵀ` through Q8 activations (see the module docs), as a row-major `[m, n]`
/// vector. Formats without a Q8 dot product here ([`BlockFormat::has_q8_dot`]: the 5-bit and
/// K-quant formats) are multiplied exactly by [`crate::matmul_nt_quantized`] instead.
///
/// # Panics
/// If `x` does not hold `m · w.cols()` values.
pub fn matmul_nt_q8(x: &[f32], w: &QuantizedMatrix, m: usize) -> Vec<f32> {
    if !w.format().has_q8_dot() {
        return crate::matmul_nt_quantized(x, w, m);
    }
    let (k, n) = (w.cols(), w.rows());
    let xq = Q8Rows::quantize(x, m, k);
    let mut y = vec![0.0; m * n];
    if m == 0 || n == 0 {
        return y;
    }
    let simd = crate::simd_available();
    let out = OutPtr(y.as_mut_ptr());
    let run = |c0: usize, c1: usize| {
        for c in c0..c1 {
            let mut col = [0.0f32; ROWS];
            let mut rows = 0;
            while rows < m {
                let take = (m - rows).min(col.len());
                dot_rows(
                    w.format(),
                    w.row_bytes_of(c),
                    &xq,
                    rows,
                    &mut col[..take],
                    simd,
                );
                for (r, v) in col[..take].iter().enumerate() {
                    // SAFETY: y holds m × n values; this call alone writes column c.
                    unsafe { *out.get().add((rows + r) * n + c) = *v };
                }
                rows += take;
            }
        }
    };
    column_chunks(n, m * n * k, 4, run);
    y
}

/// Sum of 8 lanes in the fixed order both paths use.
fn lane_sum(l: &[f32; LANES]) -> f32 {
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

/// One weight row's dot products with activation rows `r0..r0 + out.len()`.
fn dot_rows(format: BlockFormat, wrow: &[u8], x: &Q8Rows, r0: usize, out: &mut [f32], simd: bool) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: AVX2 is present (`simd`); `wrow` is one row of `x.blocks` blocks.
        unsafe { avx2::dot_rows(format, wrow, x, r0, out) };
        return;
    }
    let _ = simd;
    portable_dot_rows(format, wrow, x, r0, out);
}

/// A weight block's 32 values as integers: signed (Q4_0 as `q - 8`, Q8_0) or unsigned
/// (Q4_1's nibbles).
fn block_values(format: BlockFormat, b: &[u8]) -> [i32; BLOCK_ELEMS] {
    let mut v = [0i32; BLOCK_ELEMS];
    match format {
        BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
            let (off, bias) = match format {
                BlockFormat::Q4_0 => (2, 8),
                _ => (4, 0),
            };
            for (j, q) in b[off..off + 16].iter().enumerate() {
                v[j] = (q & 0x0F) as i32 - bias;
                v[16 + j] = (q >> 4) as i32 - bias;
            }
        }
        BlockFormat::Q8_0 => {
            for (j, &q) in b[2..34].iter().enumerate() {
                v[j] = (q as i8) as i32;
            }
        }
        other => unreachable!("{other:?} has no Q8 dot product (matmul_nt_q8 checks)"),
    }
    v
}

/// The reference of the AVX2 path: the same sums in the same order.
fn portable_dot_rows(format: BlockFormat, wrow: &[u8], x: &Q8Rows, r0: usize, out: &mut [f32]) {
    let bb = format.block_bytes();
    let nb = x.blocks;
    let mut acc = [[0.0f32; LANES]; ROWS];
    let mut mins = [0.0f32; ROWS];
    let rows = out.len();
    for (b, block) in wrow.chunks_exact(bb).enumerate() {
        let dw = f16_at(block, 0);
        let wv = block_values(format, block);
        for (r, (a, mn)) in acc[..rows]
            .iter_mut()
            .zip(mins[..rows].iter_mut())
            .enumerate()
        {
            let i = (r0 + r) * nb + b;
            let xq = &x.q[i * BLOCK_ELEMS..(i + 1) * BLOCK_ELEMS];
            let scale = dw * x.d[i];
            for (l, lane) in a.iter_mut().enumerate() {
                let sum: i32 = (0..4).map(|t| wv[4 * l + t] * xq[4 * l + t] as i32).sum();
                *lane += sum as f32 * scale;
            }
            if format == BlockFormat::Q4_1 {
                *mn += f16_at(block, 2) * x.s[i];
            }
        }
    }
    for ((o, a), mn) in out.iter_mut().zip(&acc).zip(&mins) {
        *o = lane_sum(a) + mn;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{LANES, Q8Rows, lane_sum};
    use crate::blocks::avx2::f16;
    use crate::blocks::{BLOCK_ELEMS, BlockFormat};

    /// The formats as const parameters, so that each gets its own loop with no branch on the
    /// format inside.
    const Q4_0: u8 = 0;
    const Q4_1: u8 = 1;
    const Q8_0: u8 = 2;
    /// Activation rows whose accumulators stay in registers together.
    const GROUP: usize = 4;

    /// The block format of a `KIND`.
    fn format<const KIND: u8>() -> BlockFormat {
        match KIND {
            Q4_0 => BlockFormat::Q4_0,
            Q4_1 => BlockFormat::Q4_1,
            _ => BlockFormat::Q8_0,
        }
    }

    /// A weight block as 32 bytes: signed for Q4_0 (`q - 8`) and Q8_0, unsigned nibbles for
    /// Q4_1.
    ///
    /// # Safety
    /// AVX2 present; `b` points to one whole block of `KIND`.
    #[target_feature(enable = "avx2,f16c")]
    #[inline]
    unsafe fn block_vector<const KIND: u8>(b: *const u8) -> __m256i {
        // SAFETY: `b` points to one whole block.
        unsafe {
            if KIND == Q8_0 {
                return _mm256_loadu_si256(b.add(2) as *const __m256i);
            }
            let off = if KIND == Q4_0 { 2 } else { 4 };
            let raw = _mm_loadu_si128(b.add(off) as *const __m128i);
            let mask = _mm_set1_epi8(0x0F);
            let lo = _mm_and_si128(raw, mask);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(raw), mask);
            let v = _mm256_set_m128i(hi, lo);
            if KIND == Q4_0 {
                _mm256_sub_epi8(v, _mm256_set1_epi8(8))
            } else {
                v
            }
        }
    }

    /// One weight row's dot products with `R` activation rows from `r0`, as
    /// [`super::portable_dot_rows`] computes them; the `R` accumulators live in registers.
    ///
    /// # Safety
    /// AVX2 + F16C present; `wrow` one row of `x.blocks` blocks of `KIND`; rows `r0..r0 + R`
    /// exist in `x`; `out` holds `R` values.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn group<const KIND: u8, const R: usize>(
        wrow: &[u8],
        x: &Q8Rows,
        r0: usize,
        out: &mut [f32],
    ) {
        let bb = format::<KIND>().block_bytes();
        let nb = x.blocks;
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); R];
        let mut mins = [0.0f32; R];
        let (xq, xd, xs) = (x.q.as_ptr(), x.d.as_ptr(), x.s.as_ptr());
        for b in 0..nb {
            // SAFETY: block b of the row, and block b of rows r0..r0 + R of x, exist.
            unsafe {
                let blk = wrow.as_ptr().add(b * bb);
                let dw = f16(blk);
                let wv = block_vector::<KIND>(blk);
                let wabs = if KIND == Q4_1 {
                    wv
                } else {
                    _mm256_sign_epi8(wv, wv)
                };
                let m = if KIND == Q4_1 { f16(blk.add(2)) } else { 0.0 };
                for r in 0..R {
                    let i = (r0 + r) * nb + b;
                    let xv = _mm256_loadu_si256(xq.add(i * BLOCK_ELEMS) as *const __m256i);
                    let xv = if KIND == Q4_1 {
                        xv
                    } else {
                        _mm256_sign_epi8(xv, wv)
                    };
                    let pairs = _mm256_maddubs_epi16(wabs, xv);
                    let lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                    let scale = _mm256_set1_ps(dw * *xd.add(i));
                    acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(lanes, scale));
                    if KIND == Q4_1 {
                        mins[r] += m * *xs.add(i);
                    }
                }
            }
        }
        for r in 0..R {
            let mut l = [0.0f32; LANES];
            // SAFETY: l holds 8 floats.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), acc[r]) };
            out[r] = lane_sum(&l) + mins[r];
        }
    }

    /// [`group`] over `out.len()` rows, [`GROUP`] at a time.
    ///
    /// # Safety
    /// As [`group`], for rows `r0..r0 + out.len()`.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn rows_of<const KIND: u8>(wrow: &[u8], x: &Q8Rows, r0: usize, out: &mut [f32]) {
        for (g, o) in out.chunks_mut(GROUP).enumerate() {
            let r = r0 + g * GROUP;
            // SAFETY: forwarded, `o.len()` rows from `r`.
            unsafe {
                match o.len() {
                    1 => group::<KIND, 1>(wrow, x, r, o),
                    2 => group::<KIND, 2>(wrow, x, r, o),
                    3 => group::<KIND, 3>(wrow, x, r, o),
                    _ => group::<KIND, GROUP>(wrow, x, r, o),
                }
            }
        }
    }

    /// One weight row's dot products with activation rows `r0..r0 + out.len()`.
    ///
    /// # Safety
    /// AVX2 + F16C present; `wrow` one row of `x.blocks` blocks of `format`; the rows exist in
    /// `x`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn dot_rows(
        format: BlockFormat,
        wrow: &[u8],
        x: &Q8Rows,
        r0: usize,
        out: &mut [f32],
    ) {
        // SAFETY: forwarded.
        unsafe {
            match format {
                BlockFormat::Q4_0 => rows_of::<Q4_0>(wrow, x, r0, out),
                BlockFormat::Q4_1 => rows_of::<Q4_1>(wrow, x, r0, out),
                BlockFormat::Q8_0 => rows_of::<Q8_0>(wrow, x, r0, out),
                other => unreachable!("{other:?} has no Q8 dot product (matmul_nt_q8 checks)"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matmul_nt_quantized;

    /// Deterministic values in [-scale, scale).
    fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
            })
            .collect()
    }

    /// A random `[n, k]` matrix of `format` blocks (scales as f16, values anywhere in range).
    fn matrix(format: BlockFormat, n: usize, k: usize, seed: u64) -> QuantizedMatrix {
        let bb = format.block_bytes();
        let blocks = n * k / BLOCK_ELEMS;
        let bytes = values(blocks * bb, seed, 1.0);
        let scales = values(blocks * 2, seed + 1, 0.02);
        let mut data = Vec::with_capacity(blocks * bb);
        for b in 0..blocks {
            data.extend(
                half::f16::from_f32(scales[2 * b].abs() + 1e-3)
                    .to_bits()
                    .to_le_bytes(),
            );
            let mut rest = 2;
            if format == BlockFormat::Q4_1 {
                data.extend(
                    half::f16::from_f32(scales[2 * b + 1])
                        .to_bits()
                        .to_le_bytes(),
                );
                rest = 4;
            }
            for j in rest..bb {
                data.push(((bytes[b * bb + j] + 1.0) * 127.9) as u8);
            }
        }
        QuantizedMatrix::new(format, n, k, data).unwrap()
    }

    #[test]
    fn quantized_rows_follow_ggml() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 - 20.5) * 0.25).collect();
        let q = Q8Rows::quantize(&x, 2, 32);
        assert_eq!(q.rows(), 2);
        // Block 0: max |x| = 20.5 × 0.25 = 5.125 → d = 5.125 / 127; x = -5.125 → -127.
        assert_eq!(q.d[0], 5.125 / 127.0);
        assert_eq!(q.q[0], -127);
        let sum: i32 = q.q[..32].iter().map(|&v| v as i32).sum();
        assert_eq!(q.s[0], q.d[0] * sum as f32);
        // All zeros: scale 0, values 0.
        let z = Q8Rows::quantize(&[0.0; 32], 1, 32);
        assert_eq!(
            (z.d[0], z.s[0], z.q.iter().all(|&v| v == 0)),
            (0.0, 0.0, true)
        );
    }

    #[test]
    fn simd_and_portable_paths_agree_bit_for_bit() {
        if !crate::simd_available() {
            eprintln!("SKIPPED: no AVX2 on this CPU (the portable path ran alone)");
            return;
        }
        // Rows 1, 2, 3, 4 + 1 and 4 + 3: every register group the AVX2 path runs.
        for (format, m) in [BlockFormat::Q4_0, BlockFormat::Q4_1, BlockFormat::Q8_0]
            .into_iter()
            .flat_map(|f| [1, 2, 3, 5, 7].map(|m| (f, m)))
        {
            let (k, n) = (256, 7);
            let w = matrix(format, n, k, 3);
            let x = values(m * k, 9, 2.0);
            let xq = Q8Rows::quantize(&x, m, k);
            for c in 0..n {
                let (mut a, mut b) = (vec![0.0; m], vec![0.0; m]);
                dot_rows(format, w.row_bytes_of(c), &xq, 0, &mut a, true);
                dot_rows(format, w.row_bytes_of(c), &xq, 0, &mut b, false);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{format:?} {m} rows, column {c}");
            }
        }
    }

    #[test]
    fn close_to_the_exact_product() {
        // Q8 activations carry ~1/254 of each block's largest value as rounding error: the
        // products stay within 1 % of the output scale (llama.cpp makes the same trade).
        for format in [BlockFormat::Q4_0, BlockFormat::Q4_1, BlockFormat::Q8_0] {
            let (m, k, n) = (3, 576, 40);
            let w = matrix(format, n, k, 11);
            let x = values(m * k, 5, 1.5);
            let exact = matmul_nt_quantized(&x, &w, m);
            let approx = matmul_nt_q8(&x, &w, m);
            let scale = exact.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let worst = exact
                .iter()
                .zip(&approx)
                .fold(0.0f32, |a, (e, q)| a.max((e - q).abs()));
            assert!(
                worst <= 0.01 * scale,
                "{format:?}: worst {worst} against scale {scale}"
            );
            assert!(worst > 0.0, "{format:?}: the Q8 path is an approximation");
        }
    }

    #[test]
    fn parallel_chunks_give_the_same_products() {
        // 8 × 512 × 300: above the size from which products are split over threads.
        let w = matrix(BlockFormat::Q4_1, 300, 512, 2);
        let x = values(8 * 512, 4, 1.0);
        let y = matmul_nt_q8(&x, &w, 8);
        let xq = Q8Rows::quantize(&x, 8, 512);
        for c in [0, 150, 299] {
            let mut col = vec![0.0; 8];
            dot_rows(
                w.format(),
                w.row_bytes_of(c),
                &xq,
                0,
                &mut col,
                crate::simd_available(),
            );
            let got: Vec<f32> = (0..8).map(|r| y[r * 300 + c]).collect();
            assert_eq!(got, col, "column {c}");
        }
    }

    #[test]
    fn formats_without_a_q8_dot_product_are_multiplied_exactly() {
        for format in BlockFormat::ALL.into_iter().filter(|f| !f.has_q8_dot()) {
            let (k, bb) = (format.block_elems(), format.block_bytes());
            let mut data: Vec<u8> = values(4 * bb, 7, 1.0)
                .iter()
                .map(|v| ((v + 1.0) * 127.9) as u8)
                .collect();
            for b in data.chunks_exact_mut(bb) {
                for &at in format.f16_fields() {
                    b[at..at + 2].copy_from_slice(&0x2400u16.to_le_bytes()); // 1/64
                }
            }
            let w = QuantizedMatrix::new(format, 4, k, data).unwrap();
            let x = values(3 * k, 8, 1.0);
            let exact = crate::matmul_nt_quantized(&x, &w, 3);
            assert_eq!(matmul_nt_q8(&x, &w, 3), exact, "{format:?}");
        }
    }
}
