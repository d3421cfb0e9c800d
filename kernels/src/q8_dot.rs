//! `y = x · wᵀ` with quantized weights the way llama.cpp computes it on the CPU: each row of `x`
//! quantized once to Q8 blocks (32 values, an f32 scale `d = max|x| / 127`, values rounded
//! half away from zero, as GGML's `quantize_row_q8_1` reference), then integer dot products
//! with the weight blocks — no float conversion per weight, a quarter of the bytes of f32
//! activations — and f32 only at each block's scale:
//!
//! - Q4_0 (`w = (q - 8)·d`), Q5_0 (`w = (q - 16)·d`) and Q8_0 (`w = q·d`):
//!   `Σ w·x ≈ d_w·d_x · Σ q_w·q_x`;
//! - Q4_1 and Q5_1 (`w = q·d + m`): `d_w·d_x · Σ q_w·q_x + m · (d_x · Σ q_x)`;
//! - the K-quants Q4_K and Q5_K (`w = (d·sc)·q - dmin·m`, a 6-bit `sc` and `m` per 32
//!   values) and Q6_K (`w = (d·sc)·(q - 32)`, an 8-bit `sc` per 16 values), each activation
//!   block of 32 meeting one sub-block (Q4_K, Q5_K) or two (Q6_K): `d·d_x · Σ sc·q_w·q_x`, the
//!   sub-block scales applied to the integer sums (as llama.cpp's `vec_dot_q4_K_q8_K` does),
//!   and for Q4_K and Q5_K `- (dmin·m) · (d_x · Σ q_x)`. llama.cpp quantizes the activations
//!   of these to Q8_K (one scale per 256 values); here they keep the 32-value blocks of the
//!   other formats, one scale per 32, so one quantized row serves every projection.
//!
//! This is an approximation of the f32 product (the activations lose precision to 8 bits per
//! block), which [`crate::matmul_nt_quantized`] computes exactly; the callers decide which one
//! runs. Its error is measured against the f32 path in the tests.
//!
//! Each block's 32 products are summed in 8 integer lanes of 4 (what AVX2's `maddubs` +
//! `madd` give); each lane is converted to f32, multiplied by the block's scale and added to
//! its lane's f32 accumulator in one fused multiply-add (as llama.cpp's AVX2 code does), and the 8 lanes are summed
//! in a fixed order at the end, after which the minimum terms (summed block by block) are
//! added. (For the K-quants each lane's integer sum is first multiplied by its sub-block
//! scale.) The AVX2 path and the portable path do exactly these operations, so their
//! results are bit-identical (the tests check it).

use crate::blocks::{BLOCK_ELEMS, BlockFormat, QuantizedMatrix};
use crate::fields::f16_at;
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
        let (mut d, mut s, mut q) = (vec![0.0; n], vec![0.0; n], vec![0i8; m * k]);
        #[cfg(target_arch = "x86_64")]
        if crate::simd_available() {
            // SAFETY: AVX2 is present; x, q hold n blocks and d, s n values.
            unsafe { avx2::quantize(x, &mut d, &mut s, &mut q) };
            return Self::from_parts(k, d, s, q);
        }
        portable_quantize(x, &mut d, &mut s, &mut q);
        Self::from_parts(k, d, s, q)
    }

    /// Rows of `k` values from their blocks' scales, sums and values.
    fn from_parts(k: usize, d: Vec<f32>, s: Vec<f32>, q: Vec<i8>) -> Self {
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

/// Quantizes whole blocks of `x` into `d`, `s`, `q`: GGML's reference (`quantize_row_q8_1`),
/// which the AVX2 path reproduces bit for bit.
fn portable_quantize(x: &[f32], d: &mut [f32], s: &mut [f32], q: &mut [i8]) {
    for (((xb, qb), db), sb) in x
        .chunks_exact(BLOCK_ELEMS)
        .zip(q.chunks_exact_mut(BLOCK_ELEMS))
        .zip(d.iter_mut())
        .zip(s.iter_mut())
    {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let scale = amax / 127.0;
        let inv = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        let mut sum = 0i32;
        for (v, o) in xb.iter().zip(qb.iter_mut()) {
            *o = (v * inv).round() as i8;
            sum += *o as i32;
        }
        *db = scale;
        *sb = scale * sum as f32;
    }
}

/// `x[m, k] · w[n, k]ᵀ` through Q8 activations (see the module docs), as a row-major `[m, n]`
/// vector, for weights in any of GGML's block formats.
///
/// # Panics
/// If `x` does not hold `m · w.cols()` values.
pub fn matmul_nt_q8(x: &[f32], w: &QuantizedMatrix, m: usize) -> Vec<f32> {
    let (k, n) = (w.cols(), w.rows());
    let xq = Q8Rows::quantize(x, m, k);
    let mut y = vec![0.0; m * n];
    if m == 0 || n == 0 {
        return y;
    }
    let simd = Simd::detect();
    let out = OutPtr(y.as_mut_ptr());
    let run = |c0: usize, c1: usize| {
        // SAFETY: y holds m × n values; this call alone writes columns c0..c1 (c1 ≤ n).
        unsafe { columns(w, &xq, c0, c1, out.get(), simd) }
    };
    column_chunks(n, m * n * k, 4, run);
    y
}

/// The instructions the row kernels run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Simd {
    /// The portable loops.
    None,
    /// AVX2 (+ FMA, F16C).
    Avx2,
    /// AVX2 and AVX-512 VNNI's byte dot products.
    Vnni,
}

impl Simd {
    /// The best this CPU has.
    fn detect() -> Self {
        if !crate::simd_available() {
            return Simd::None;
        }
        if vnni_available() {
            Simd::Vnni
        } else {
            Simd::Avx2
        }
    }
}

/// Whether the CPU has AVX-512 VNNI with 256-bit vectors (AVX-512 VL), whose `vpdpbusd` sums a
/// block's four-product lanes in one instruction.
fn vnni_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512vnni")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Output columns `c0..c1` of every row of `x`, written into the row-major `[m, n]` `y`.
///
/// # Safety
/// `w` has a Q8 dot product and `x.blocks` blocks a row; `y` points to `x.rows() × w.rows()`
/// writable values; `c1 ≤ w.rows()`; `simd` only what this CPU has ([`Simd::detect`]).
unsafe fn columns(w: &QuantizedMatrix, x: &Q8Rows, c0: usize, c1: usize, y: *mut f32, simd: Simd) {
    #[cfg(target_arch = "x86_64")]
    match simd {
        // SAFETY (both): forwarded; the instructions are present (`simd`).
        Simd::Avx2 => return unsafe { avx2::columns(w, x, c0, c1, y) },
        Simd::Vnni => return unsafe { avx2::columns_vnni(w, x, c0, c1, y) },
        Simd::None => {}
    }
    let _ = simd;
    // SAFETY: forwarded.
    unsafe {
        each_column(w, x, c0, c1, y, |wrow, r0, out| {
            portable_dot_rows(w.format(), wrow, x, r0, out)
        })
    }
}

/// The loop both paths of [`columns`] share: output columns `c0..c1`, one weight row at a
/// time, its dot products with up to [`ROWS`] activation rows at a time from `dot(weight row,
/// first activation row, outputs)`, written into the row-major `[m, n]` `y`.
///
/// # Safety
/// As [`columns`].
#[inline(always)]
unsafe fn each_column(
    w: &QuantizedMatrix,
    x: &Q8Rows,
    c0: usize,
    c1: usize,
    y: *mut f32,
    mut dot: impl FnMut(&[u8], usize, &mut [f32]),
) {
    let (m, n) = (x.rows(), w.rows());
    let mut col = [0.0f32; ROWS];
    for c in c0..c1 {
        for r0 in (0..m).step_by(ROWS) {
            let take = (m - r0).min(ROWS);
            dot(w.row_bytes_of(c), r0, &mut col[..take]);
            for (r, v) in col[..take].iter().enumerate() {
                // SAFETY: y holds m × n values and c < n (the caller's contract).
                unsafe { *y.add((r0 + r) * n + c) = *v };
            }
        }
    }
}

/// Sum of 8 lanes in the fixed order both paths use.
fn lane_sum(l: &[f32; LANES]) -> f32 {
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

/// The 32 weights that meet activation block `b` of a row, as integers with their scales.
struct SubBlock {
    /// The values: signed (Q4_0 as `q - 8`, Q5_0 as `q - 16`, Q8_0, Q6_K as `q - 32`) or
    /// unsigned (Q4_1, Q5_1, Q4_K, Q5_K).
    v: [i32; BLOCK_ELEMS],
    /// Each lane's integer scale (its 4 products' sum is multiplied by it): 1 for the 32-value
    /// formats, the 6-bit sub-block scale for Q4_K and Q5_K, the 8-bit scale of each half for
    /// Q6_K.
    lane_scale: [i32; LANES],
    /// The float scale of the block or super-block (`d`).
    d: f32,
    /// What multiplies the activation block's `d · Σ q`: Q4_1's and Q5_1's `m`, Q4_K's and
    /// Q5_K's `-dmin · m`.
    min: Option<f32>,
}

/// Sub-block `b` (of 32 weights) of the row `wrow`: for the 32-value formats block `b`; for
/// the 256-value K-quants sub-block `b % 8` of super-block `b / 8`, laid out as
/// [`crate::kquants`] documents.
fn sub_block(format: BlockFormat, wrow: &[u8], b: usize) -> SubBlock {
    let mut v = [0i32; BLOCK_ELEMS];
    let mut lane_scale = [1i32; LANES];
    let (d, min) = match format {
        BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
            let blk = &wrow[b * format.block_bytes()..];
            let (off, bias) = match format {
                BlockFormat::Q4_0 => (2, 8),
                _ => (4, 0),
            };
            for (j, q) in blk[off..off + 16].iter().enumerate() {
                v[j] = (q & 0x0F) as i32 - bias;
                v[16 + j] = (q >> 4) as i32 - bias;
            }
            let min = (format == BlockFormat::Q4_1).then(|| f16_at(blk, 2));
            (f16_at(blk, 0), min)
        }
        BlockFormat::Q5_0 | BlockFormat::Q5_1 => {
            let blk = &wrow[b * format.block_bytes()..];
            let (off, bias, min) = match format {
                BlockFormat::Q5_0 => (2, 16, None),
                _ => (4, 0, Some(f16_at(blk, 2))),
            };
            let qh = u32::from_le_bytes([blk[off], blk[off + 1], blk[off + 2], blk[off + 3]]);
            for (j, q) in blk[off + 4..off + 20].iter().enumerate() {
                let (h0, h1) = ((qh >> j) & 1, (qh >> (j + 16)) & 1);
                v[j] = ((q & 0x0F) as u32 | (h0 << 4)) as i32 - bias;
                v[16 + j] = ((q >> 4) as u32 | (h1 << 4)) as i32 - bias;
            }
            (f16_at(blk, 0), min)
        }
        BlockFormat::Q8_0 => {
            let blk = &wrow[b * format.block_bytes()..];
            for (j, &q) in blk[2..34].iter().enumerate() {
                v[j] = (q as i8) as i32;
            }
            (f16_at(blk, 0), None)
        }
        BlockFormat::Q4_K | BlockFormat::Q5_K => {
            let (blk, j) = (&wrow[b / 8 * format.block_bytes()..], b % 8);
            let (sc, m) = crate::kquants::scale_min_bits(&blk[4..16], j);
            let high = format == BlockFormat::Q5_K;
            let qs = &blk[if high { 48 } else { 16 } + 32 * (j / 2)..][..32];
            for (l, q) in qs.iter().enumerate() {
                let nibble = if j.is_multiple_of(2) {
                    q & 0x0F
                } else {
                    q >> 4
                };
                // Q5_K: the fifth bit of sub-block j is bit j of high-bit byte l.
                let fifth = if high {
                    ((blk[16 + l] >> j) & 1) << 4
                } else {
                    0
                };
                v[l] = (nibble | fifth) as i32;
            }
            lane_scale = [sc as i32; LANES];
            // w = (d·sc)·q - dmin·m: the minimum's term is subtracted.
            (f16_at(blk, 0), Some(-(f16_at(blk, 2) * m as f32)))
        }
        BlockFormat::Q6_K => {
            let (blk, j) = (&wrow[b / 8 * format.block_bytes()..], b % 8);
            let (half, k) = (j / 4, j % 4);
            let ql = &blk[64 * half + 32 * (k % 2)..][..32];
            let qh = &blk[128 + 32 * half..][..32];
            for l in 0..32 {
                let nibble = if k < 2 { ql[l] & 0x0F } else { ql[l] >> 4 };
                let high = (qh[l] >> (2 * k)) & 3;
                v[l] = (nibble | (high << 4)) as i32 - 32;
            }
            let sc = &blk[192 + 8 * half + 2 * k..][..2];
            for (l, s) in lane_scale.iter_mut().enumerate() {
                *s = sc[l / 4] as i8 as i32;
            }
            (f16_at(blk, 208), None)
        }
    };
    SubBlock {
        v,
        lane_scale,
        d,
        min,
    }
}

/// The reference of the AVX2 path: the same sums in the same order.
fn portable_dot_rows(format: BlockFormat, wrow: &[u8], x: &Q8Rows, r0: usize, out: &mut [f32]) {
    let nb = x.blocks;
    let mut acc = [[0.0f32; LANES]; ROWS];
    let mut mins = [0.0f32; ROWS];
    let rows = out.len();
    for b in 0..nb {
        let w = sub_block(format, wrow, b);
        for (r, (a, mn)) in acc[..rows]
            .iter_mut()
            .zip(mins[..rows].iter_mut())
            .enumerate()
        {
            let i = (r0 + r) * nb + b;
            let xq = &x.q[i * BLOCK_ELEMS..(i + 1) * BLOCK_ELEMS];
            let scale = w.d * x.d[i];
            for (l, lane) in a.iter_mut().enumerate() {
                let sum: i32 = (0..4).map(|t| w.v[4 * l + t] * xq[4 * l + t] as i32).sum();
                *lane = ((sum * w.lane_scale[l]) as f32).mul_add(scale, *lane);
            }
            if let Some(m) = w.min {
                *mn += m * x.s[i];
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
    use crate::blocks::avx2::{f16, fifth_bits, k4_bytes, q6_bytes};
    use crate::blocks::{BLOCK_ELEMS, BlockFormat, QuantizedMatrix};

    /// The formats as const parameters, so that each gets its own loop with no branch on the
    /// format inside.
    const Q4_0: u8 = 0;
    const Q4_1: u8 = 1;
    const Q8_0: u8 = 2;
    const Q4_K: u8 = 3;
    const Q6_K: u8 = 4;
    const Q5_0: u8 = 5;
    const Q5_1: u8 = 6;
    const Q5_K: u8 = 7;

    /// Whether `KIND` is a 256-value K-quant.
    const fn is_k(kind: u8) -> bool {
        matches!(kind, Q4_K | Q5_K | Q6_K)
    }

    /// Whether `KIND`'s values are unsigned with a minimum term (`q·d + m`, `(d·sc)·q - dmin·m`).
    const fn has_min(kind: u8) -> bool {
        matches!(kind, Q4_1 | Q5_1 | Q4_K | Q5_K)
    }
    /// Activation rows whose accumulators stay in registers together.
    const GROUP: usize = 4;

    /// The block format of a `KIND`.
    fn format<const KIND: u8>() -> BlockFormat {
        match KIND {
            Q4_0 => BlockFormat::Q4_0,
            Q4_1 => BlockFormat::Q4_1,
            Q4_K => BlockFormat::Q4_K,
            Q6_K => BlockFormat::Q6_K,
            Q5_0 => BlockFormat::Q5_0,
            Q5_1 => BlockFormat::Q5_1,
            Q5_K => BlockFormat::Q5_K,
            _ => BlockFormat::Q8_0,
        }
    }

    /// A weight block as 32 bytes: signed for Q4_0 (`q - 8`) and Q8_0, unsigned nibbles for
    /// Q4_1.
    ///
    /// # Safety
    /// AVX2 present; `b` points to one whole block of `KIND`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn block_vector<const KIND: u8>(b: *const u8) -> __m256i {
        // SAFETY: `b` points to one whole block.
        unsafe {
            if KIND == Q8_0 {
                return _mm256_loadu_si256(b.add(2) as *const __m256i);
            }
            let off = match KIND {
                Q4_0 => 2,
                Q4_1 => 4,
                Q5_0 => 6,
                _ => 8,
            };
            let raw = _mm_loadu_si128(b.add(off) as *const __m128i);
            let mask = _mm_set1_epi8(0x0F);
            let lo = _mm_and_si128(raw, mask);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(raw), mask);
            let v = _mm256_set_m128i(hi, lo);
            let high = _mm256_set1_epi8(0x10);
            match KIND {
                Q4_0 => _mm256_sub_epi8(v, _mm256_set1_epi8(8)),
                // (q | h·16) - 16 = q - 16 where the fifth bit h is clear.
                Q5_0 => _mm256_sub_epi8(v, _mm256_andnot_si256(fifth_bits(qh_at(b, off)), high)),
                Q5_1 => _mm256_or_si256(v, _mm256_and_si256(fifth_bits(qh_at(b, off)), high)),
                _ => v,
            }
        }
    }

    /// The 32 high bits of a 5-bit block whose nibbles start at `off`.
    ///
    /// # Safety
    /// `b` points to one whole Q5_0 or Q5_1 block.
    #[inline]
    unsafe fn qh_at(b: *const u8, off: usize) -> u32 {
        // SAFETY: the 4 bytes before the nibbles are the block's high bits.
        unsafe { std::ptr::read_unaligned(b.add(off - 4) as *const u32) }
    }

    /// Block `b` of the weight row at `wrow` as the row kernel multiplies it: its 32 values
    /// as bytes (unsigned where [`has_min`], else signed), each product pair's integer
    /// multiplier (1 for the 32-value formats, the sub-block scales for the K-quants), the
    /// float scale `d` and the minimum's factor (0 without one). For the K-quants, block `b` is
    /// sub-block `b % 8` of super-block `b / 8`.
    ///
    /// # Safety
    /// AVX2 + F16C present; `wrow` holds block `b` of `KIND`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn sub<const KIND: u8>(wrow: *const u8, b: usize) -> (__m256i, __m256i, f32, f32) {
        let bb = format::<KIND>().block_bytes();
        // SAFETY: block b of the row exists.
        unsafe {
            if is_k(KIND) {
                let blk = wrow.add(b / 8 * bb);
                let (wv, scales, min) = k_sub::<KIND>(blk, b % 8);
                let d = if KIND == Q6_K {
                    f16(blk.add(208))
                } else {
                    f16(blk)
                };
                return (wv, scales, d, min);
            }
            let blk = wrow.add(b * bb);
            let m = if has_min(KIND) { f16(blk.add(2)) } else { 0.0 };
            (block_vector::<KIND>(blk), _mm256_set1_epi16(1), f16(blk), m)
        }
    }

    /// Sub-block `j` (0..8) of the K-quant super-block at `blk` as [`super::sub_block`]
    /// reads it: its 32 values as bytes (Q4_K's nibbles unsigned, Q6_K's `q - 32` signed),
    /// each product pair's integer scale (16 lanes of i16), and the minimum's factor.
    ///
    /// # Safety
    /// AVX2 present; `blk` points to one whole super-block of `KIND`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn k_sub<const KIND: u8>(blk: *const u8, j: usize) -> (__m256i, __m256i, f32) {
        // SAFETY: one whole super-block at blk.
        unsafe {
            if KIND == Q4_K || KIND == Q5_K {
                let s = std::slice::from_raw_parts(blk.add(4), 12);
                let (sc, m) = crate::kquants::scale_min_bits(s, j);
                let q = if KIND == Q5_K {
                    k4_bytes::<true>(blk, j)
                } else {
                    k4_bytes::<false>(blk, j)
                };
                let min = -(f16(blk.add(2)) * m as f32);
                return (q, _mm256_set1_epi16(sc as i16), min);
            }
            let sc = blk.add(192 + 8 * (j / 4) + 2 * (j % 4));
            let scales = _mm256_set_m128i(
                _mm_set1_epi16(*sc.add(1) as i8 as i16),
                _mm_set1_epi16(*sc as i8 as i16),
            );
            (q6_bytes(blk, j), scales, 0.0)
        }
    }

    /// One weight row's dot products with `R` activation rows from `r0`, as
    /// [`super::portable_dot_rows`] computes them; the `R` accumulators live in registers.
    ///
    /// With `VNNI` (AVX-512 VNNI), a 32-value block's four-product lane sums come from one
    /// `vpdpbusd` instead of `maddubs` + `madd`: the same integers (no pair sum reaches
    /// `maddubs`' i16 saturation: at most 2·128·127), so the same bits.
    ///
    /// # Safety
    /// AVX2 + F16C present (and AVX-512 VNNI + VL with `VNNI`), inlined into a function that
    /// enables them; `wrow` one row of `x.blocks` blocks of `KIND`; rows `r0..r0 + R` exist in
    /// `x`; `out` holds `R` values.
    #[inline(always)]
    unsafe fn group<const KIND: u8, const R: usize, const VNNI: bool>(
        wrow: &[u8],
        x: &Q8Rows,
        r0: usize,
        out: &mut [f32],
    ) {
        let nb = x.blocks;
        // SAFETY: AVX is present (the caller's contract).
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        let mut mins = [0.0f32; R];
        let (xq, xd, xs) = (x.q.as_ptr(), x.d.as_ptr(), x.s.as_ptr());
        for b in 0..nb {
            // SAFETY: block b of the row, and block b of rows r0..r0 + R of x, exist.
            unsafe {
                let (wv, mult, dw, m) = sub::<KIND>(wrow.as_ptr(), b);
                let wabs = if has_min(KIND) {
                    wv
                } else {
                    _mm256_sign_epi8(wv, wv)
                };
                for r in 0..R {
                    let i = (r0 + r) * nb + b;
                    let xv = _mm256_loadu_si256(xq.add(i * BLOCK_ELEMS) as *const __m256i);
                    let xv = if has_min(KIND) {
                        xv
                    } else {
                        _mm256_sign_epi8(xv, wv)
                    };
                    let sums = if VNNI && !is_k(KIND) {
                        _mm256_dpbusd_epi32(_mm256_setzero_si256(), wabs, xv)
                    } else {
                        _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, xv), mult)
                    };
                    let lanes = _mm256_cvtepi32_ps(sums);
                    let scale = _mm256_set1_ps(dw * *xd.add(i));
                    acc[r] = _mm256_fmadd_ps(lanes, scale, acc[r]);
                    if has_min(KIND) {
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
    #[inline(always)]
    unsafe fn rows_of<const KIND: u8, const VNNI: bool>(
        wrow: &[u8],
        x: &Q8Rows,
        r0: usize,
        out: &mut [f32],
    ) {
        for (g, o) in out.chunks_mut(GROUP).enumerate() {
            let r = r0 + g * GROUP;
            // SAFETY: forwarded, `o.len()` rows from `r`.
            unsafe {
                match o.len() {
                    1 => group::<KIND, 1, VNNI>(wrow, x, r, o),
                    2 => group::<KIND, 2, VNNI>(wrow, x, r, o),
                    3 => group::<KIND, 3, VNNI>(wrow, x, r, o),
                    _ => group::<KIND, GROUP, VNNI>(wrow, x, r, o),
                }
            }
        }
    }

    /// [`super::portable_quantize`] with AVX2: the same maximum, scale, products and
    /// rounding (half away from zero, done as truncation plus a step where the remainder is at
    /// least a half), so the same bits.
    ///
    /// # Safety
    /// AVX2 present; `x` and `q` hold `d.len()` blocks; `s` as many values as `d`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize(x: &[f32], d: &mut [f32], s: &mut [f32], q: &mut [i8]) {
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
        let sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MIN));
        let half = _mm256_set1_ps(0.5);
        let one = _mm256_set1_ps(1.0);
        for (b, (db, sb)) in d.iter_mut().zip(s.iter_mut()).enumerate() {
            // SAFETY: block b of x and q exists.
            unsafe {
                let xb = x.as_ptr().add(b * BLOCK_ELEMS);
                let v: [__m256; 4] = std::array::from_fn(|j| _mm256_loadu_ps(xb.add(8 * j)));
                let a = v.map(|v| _mm256_and_ps(v, abs_mask));
                let m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
                let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
                let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
                let m = _mm_max_ss(m, _mm_shuffle_ps::<1>(m, m));
                let scale = _mm_cvtss_f32(m) / 127.0;
                let inv = _mm256_set1_ps(if scale != 0.0 { 1.0 / scale } else { 0.0 });
                let ints = v.map(|v| {
                    let p = _mm256_mul_ps(v, inv);
                    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(p);
                    let rest = _mm256_and_ps(_mm256_sub_ps(p, t), abs_mask);
                    let step = _mm256_and_ps(
                        _mm256_cmp_ps::<_CMP_GE_OQ>(rest, half),
                        _mm256_or_ps(one, _mm256_and_ps(p, sign_mask)),
                    );
                    _mm256_cvttps_epi32(_mm256_add_ps(t, step))
                });
                let sum = _mm256_add_epi32(
                    _mm256_add_epi32(ints[0], ints[1]),
                    _mm256_add_epi32(ints[2], ints[3]),
                );
                let mut lanes = [0i32; 8];
                _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sum);
                // Lanes [0..4 | 8..12] and [4..8 | 12..16] after the in-lane packs: the
                // permutation puts the 32 values back in order.
                let w16a = _mm256_packs_epi32(ints[0], ints[1]);
                let w16b = _mm256_packs_epi32(ints[2], ints[3]);
                let w8 = _mm256_packs_epi16(w16a, w16b);
                let w8 = _mm256_permutevar8x32_epi32(w8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256(q.as_mut_ptr().add(b * BLOCK_ELEMS) as *mut __m256i, w8);
                *db = scale;
                *sb = scale * lanes.iter().sum::<i32>() as f32;
            }
        }
    }

    /// Output columns `c0..c1` of every row of `x` into the row-major `[m, n]` `y`.
    ///
    /// # Safety
    /// AVX2 + F16C present; `w` a Q8-dot format with `x.blocks` blocks a row; `y` holds
    /// `x.rows() × w.rows()` values; `c1 ≤ w.rows()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn columns(
        w: &QuantizedMatrix,
        x: &Q8Rows,
        c0: usize,
        c1: usize,
        y: *mut f32,
    ) {
        // SAFETY: forwarded.
        unsafe { by_format::<false>(w, x, c0, c1, y) }
    }

    /// [`columns`] with AVX-512 VNNI's dot products (see [`group`]).
    ///
    /// # Safety
    /// As [`columns`], and AVX-512 VNNI + VL present ([`super::vnni_available`]).
    #[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
    pub(super) unsafe fn columns_vnni(
        w: &QuantizedMatrix,
        x: &Q8Rows,
        c0: usize,
        c1: usize,
        y: *mut f32,
    ) {
        // SAFETY: forwarded.
        unsafe { by_format::<true>(w, x, c0, c1, y) }
    }

    /// [`columns_of`] for `w`'s format.
    ///
    /// # Safety
    /// As [`columns`], inlined into a function that enables what `VNNI` needs.
    #[inline(always)]
    unsafe fn by_format<const VNNI: bool>(
        w: &QuantizedMatrix,
        x: &Q8Rows,
        c0: usize,
        c1: usize,
        y: *mut f32,
    ) {
        // SAFETY: forwarded.
        unsafe {
            match w.format() {
                BlockFormat::Q4_0 => columns_of::<Q4_0, VNNI>(w, x, c0, c1, y),
                BlockFormat::Q4_1 => columns_of::<Q4_1, VNNI>(w, x, c0, c1, y),
                BlockFormat::Q8_0 => columns_of::<Q8_0, VNNI>(w, x, c0, c1, y),
                BlockFormat::Q4_K => columns_of::<Q4_K, VNNI>(w, x, c0, c1, y),
                BlockFormat::Q6_K => columns_of::<Q6_K, VNNI>(w, x, c0, c1, y),
                BlockFormat::Q5_0 => columns_of::<Q5_0, VNNI>(w, x, c0, c1, y),
                BlockFormat::Q5_1 => columns_of::<Q5_1, VNNI>(w, x, c0, c1, y),
                BlockFormat::Q5_K => columns_of::<Q5_K, VNNI>(w, x, c0, c1, y),
            }
        }
    }

    /// [`columns`] for one format, one weight row at a time, its blocks read in order (one
    /// stream for the hardware prefetcher: interleaving four weight rows to share each
    /// activation block's load measured slower, batch-1 decode 90 vs 112–129 tok/s, as two
    /// rows had before).
    ///
    /// # Safety
    /// As [`by_format`], `w` of `KIND`.
    #[inline(always)]
    unsafe fn columns_of<const KIND: u8, const VNNI: bool>(
        w: &QuantizedMatrix,
        x: &Q8Rows,
        c0: usize,
        c1: usize,
        y: *mut f32,
    ) {
        // SAFETY: forwarded; each weight row is one of w's rows of KIND, the activation rows
        // r0..r0 + out.len() exist in x.
        unsafe {
            super::each_column(w, x, c0, c1, y, |wrow, r0, out| {
                rows_of::<KIND, VNNI>(wrow, x, r0, out)
            })
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

    /// A random `[n, k]` matrix of `format` blocks: random bytes, then each f16 field a
    /// small scale (positive for `d`, either sign for a minimum).
    fn matrix(format: BlockFormat, n: usize, k: usize, seed: u64) -> QuantizedMatrix {
        let bb = format.block_bytes();
        let blocks = n * k / format.block_elems();
        let bytes = values(blocks * bb, seed, 1.0);
        let scales = values(blocks * 2, seed + 1, 0.02);
        let mut data: Vec<u8> = bytes.iter().map(|v| ((v + 1.0) * 127.9) as u8).collect();
        for (b, blk) in data.chunks_exact_mut(bb).enumerate() {
            for (j, &at) in format.f16_fields().iter().enumerate() {
                let v = if j == 0 {
                    scales[2 * b].abs() + 1e-3
                } else {
                    scales[2 * b + 1]
                };
                let v = if format.block_elems() > BLOCK_ELEMS {
                    v / 16.0 // K-quants: times 6- or 8-bit sub-block scales
                } else {
                    v
                };
                blk[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
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

    /// All of `x · wᵀ` in one call of [`columns`] (no threads), with `simd`'s instructions.
    fn product(w: &QuantizedMatrix, xq: &Q8Rows, c0: usize, simd: Simd) -> Vec<f32> {
        let (m, n) = (xq.rows(), w.rows());
        let mut y = vec![f32::NAN; m * n];
        // SAFETY: y holds m × n values; simd only where available (the callers check).
        unsafe { columns(w, xq, c0, n, y.as_mut_ptr(), simd) };
        y
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    #[test]
    fn simd_and_portable_paths_agree_bit_for_bit() {
        if !crate::simd_available() {
            eprintln!("SKIPPED: no AVX2 on this CPU (the portable path ran alone)");
            return;
        }
        // The AVX2 path, and the AVX-512 VNNI one where the CPU has it.
        let mut paths = vec![Simd::Avx2];
        if vnni_available() {
            paths.push(Simd::Vnni);
        } else {
            eprintln!("no AVX-512 VNNI on this CPU: its path is not checked here");
        }
        // Rows 1, 2, 3, 4 + 1 and 4 + 3: every register group the AVX2 path runs; from
        // column 0 and from column 2.
        for (format, m) in BlockFormat::ALL
            .into_iter()
            .flat_map(|f| [1, 2, 3, 5, 7].map(|m| (f, m)))
        {
            let (k, n) = (256, 11);
            let w = matrix(format, n, k, 3);
            let x = values(m * k, 9, 2.0);
            let xq = Q8Rows::quantize(&x, m, k);
            for (c0, &simd) in [0, 2]
                .into_iter()
                .flat_map(|c| paths.iter().map(move |p| (c, p)))
            {
                let (a, b) = (product(&w, &xq, c0, simd), product(&w, &xq, c0, Simd::None));
                let what = format!("{format:?} {m} rows from column {c0}, {simd:?}");
                assert_eq!(bits(&a), bits(&b), "{what}");
                let written = a.chunks(n).flat_map(|row| &row[c0..]);
                assert!(written.into_iter().all(|v| v.is_finite()), "{what}");
            }
        }
    }

    #[test]
    fn simd_quantization_equals_ggmls_reference() {
        if !crate::simd_available() {
            eprintln!("SKIPPED: no AVX2 on this CPU (the portable path ran alone)");
            return;
        }
        // Random blocks, a zero block, and blocks whose products land exactly on halves
        // (rounded away from zero: ±0.5 → ±1, ±2.5 → ±3) and just below them.
        let mut x = values(8 * 32, 12, 3.0);
        x.extend([0.0; 32]);
        let ties: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) * 0.5 + 0.25).collect();
        x.extend(ties.iter().map(|v| v * 127.0 / 8.25));
        x.extend((0..32).map(|i| if i == 0 { 127.0 } else { 0.5 - 1e-6 * i as f32 }));
        x.extend((0..32).map(|i| if i == 0 { -127.0 } else { -2.5 }));
        let blocks = x.len() / 32;
        let (mut d, mut s, mut q) = (vec![0.0; blocks], vec![0.0; blocks], vec![0i8; x.len()]);
        portable_quantize(&x, &mut d, &mut s, &mut q);
        let want = Q8Rows::from_parts(x.len(), d, s, q);
        let got = Q8Rows::quantize(&x, 1, x.len());
        assert_eq!(got, want);
        assert_eq!(
            got.q[(blocks - 1) * 32 + 1],
            -3,
            "-2.5 rounds away from zero"
        );
    }

    #[test]
    fn close_to_the_exact_product() {
        // Q8 activations carry ~1/254 of each block's largest value as rounding error: the
        // products stay within 1 % of the output scale (llama.cpp makes the same trade).
        for format in BlockFormat::ALL {
            let (m, k, n) = (3, 768, 40);
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
        // 8 × 512 × 300 and 1 × 512 × 300: above the size from which products are split over
        // threads.
        let w = matrix(BlockFormat::Q4_1, 300, 512, 2);
        for m in [8, 1] {
            let x = values(m * 512, 4, 1.0);
            let y = matmul_nt_q8(&x, &w, m);
            let xq = Q8Rows::quantize(&x, m, 512);
            assert_eq!(bits(&y), bits(&product(&w, &xq, 0, Simd::detect())));
        }
    }
}
