//! GGML's quantized blocks — the 32-weight Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the 256-weight
//! K-quants Q4_K, Q5_K, Q6_K ([`crate::kquants`]) —: their layout, their dequantization (f32
//! arithmetic as llama.cpp's `dequantize_row_*`), and a matrix of them kept quantized.
//!
//! The dequantized values are the same, bit for bit, whichever path computes them (explicit
//! AVX2 or portable code): each weight is one f32 multiply and,
//! for Q4_1 and Q5_1, one f32 add, both exactly rounded, never fused. That is what lets
//! [`crate::matmul_nt_quantized`] read the compact blocks and still compute exactly what a
//! product with the dequantized f32 matrix computes.

use crate::fields::f16_at;
use crate::kquants;

/// Weights per block of the 32-weight formats (and of the Q8 activation blocks); the K-quants'
/// super-blocks hold [`crate::kquants::SUPER_BLOCK_ELEMS`] (see [`BlockFormat::block_elems`]).
pub const BLOCK_ELEMS: usize = 32;

/// A GGML block format (named as GGML names it).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockFormat {
    /// f16 scale `d`, 16 bytes of 4-bit values `q`; w = (q - 8)·d. Element `j < 16` is the low
    /// nibble of byte `j`, element `16 + j` its high nibble.
    Q4_0,
    /// f16 scale `d`, f16 minimum `m`, 16 bytes of 4-bit values (as Q4_0); w = q·d + m.
    Q4_1,
    /// f16 scale `d`, 32 signed bytes; w = q·d.
    Q8_0,
    /// f16 scale `d`, 32 high bits, 16 bytes of nibbles; w = (q - 16)·d, q five bits.
    Q5_0,
    /// f16 scale `d`, f16 minimum `m`, 32 high bits, 16 bytes of nibbles; w = q·d + m.
    Q5_1,
    /// 256 weights: f16 `d` and `dmin`, eight 6-bit scales and minimums, 4-bit values;
    /// w = (d·sc)·q - dmin·m per sub-block of 32.
    Q4_K,
    /// 256 weights: as Q4_K with a fifth bit per value.
    Q5_K,
    /// 256 weights: 6-bit values, sixteen signed 8-bit scales, f16 `d`; w = (d·sc)·(q - 32)
    /// per sub-block of 16.
    Q6_K,
}

impl BlockFormat {
    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            BlockFormat::Q4_0 => 18,
            BlockFormat::Q4_1 => 20,
            BlockFormat::Q8_0 => 34,
            BlockFormat::Q5_0 => kquants::Q5_0_BYTES,
            BlockFormat::Q5_1 => kquants::Q5_1_BYTES,
            BlockFormat::Q4_K => kquants::Q4_K_BYTES,
            BlockFormat::Q5_K => kquants::Q5_K_BYTES,
            BlockFormat::Q6_K => kquants::Q6_K_BYTES,
        }
    }

    /// Weights per block (32, or 256 for the K-quants).
    pub fn block_elems(self) -> usize {
        match self {
            BlockFormat::Q4_K | BlockFormat::Q5_K | BlockFormat::Q6_K => kquants::SUPER_BLOCK_ELEMS,
            _ => BLOCK_ELEMS,
        }
    }

    /// Every format, for tests.
    #[cfg(test)]
    pub(crate) const ALL: [BlockFormat; 8] = [
        BlockFormat::Q4_0,
        BlockFormat::Q4_1,
        BlockFormat::Q5_0,
        BlockFormat::Q5_1,
        BlockFormat::Q8_0,
        BlockFormat::Q4_K,
        BlockFormat::Q5_K,
        BlockFormat::Q6_K,
    ];

    /// Byte offsets of a block's f16 scale and (where there is one) its minimum, for tests that
    /// fill the rest of a block with random bytes.
    #[cfg(test)]
    pub(crate) fn f16_fields(self) -> &'static [usize] {
        match self {
            BlockFormat::Q4_1 | BlockFormat::Q5_1 | BlockFormat::Q4_K | BlockFormat::Q5_K => {
                &[0, 2]
            }
            BlockFormat::Q6_K => &[208],
            _ => &[0],
        }
    }

    /// Dequantizes whole blocks into `out` ([`Self::block_elems`] values per block).
    ///
    /// # Panics
    /// If `blocks` is not a whole number of blocks or `out` does not hold their values.
    pub fn dequantize_into(self, blocks: &[u8], out: &mut [f32]) {
        let bb = self.block_bytes();
        assert!(
            blocks.len().is_multiple_of(bb) && out.len() == blocks.len() / bb * self.block_elems(),
            "{self:?}: {} bytes do not dequantize into {} values",
            blocks.len(),
            out.len()
        );
        #[cfg(target_arch = "x86_64")]
        if crate::simd_available() {
            if avx512::covers(self) {
                // SAFETY: AVX-512F is present (`covers`); lengths checked above.
                unsafe { avx512::dequantize(self, blocks, out) };
                return;
            }
            // SAFETY: AVX2 and F16C are present; lengths checked above.
            unsafe { avx2::dequantize(self, blocks, out) };
            return;
        }
        self.dequantize_portable(blocks, out);
    }

    /// The scalar dequantization (the reference the SIMD path must equal).
    fn dequantize_portable(self, blocks: &[u8], out: &mut [f32]) {
        match self {
            BlockFormat::Q5_0 => return kquants::q5::<false>(blocks, out),
            BlockFormat::Q5_1 => return kquants::q5::<true>(blocks, out),
            BlockFormat::Q4_K => return kquants::q45_k::<false>(blocks, out),
            BlockFormat::Q5_K => return kquants::q45_k::<true>(blocks, out),
            BlockFormat::Q6_K => return kquants::q6_k(blocks, out),
            _ => {}
        }
        let bb = self.block_bytes();
        for (b, o) in blocks
            .chunks_exact(bb)
            .zip(out.chunks_exact_mut(BLOCK_ELEMS))
        {
            let d = f16_at(b, 0);
            match self {
                BlockFormat::Q4_0 => {
                    for (j, q) in b[2..18].iter().enumerate() {
                        o[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
                        o[16 + j] = ((q >> 4) as i32 - 8) as f32 * d;
                    }
                }
                BlockFormat::Q4_1 => {
                    let m = f16_at(b, 2);
                    for (j, q) in b[4..20].iter().enumerate() {
                        o[j] = (q & 0x0F) as f32 * d + m;
                        o[16 + j] = (q >> 4) as f32 * d + m;
                    }
                }
                BlockFormat::Q8_0 => {
                    for (j, &q) in b[2..34].iter().enumerate() {
                        o[j] = (q as i8) as f32 * d;
                    }
                }
                _ => unreachable!("{self:?} is dequantized by crate::kquants"),
            }
        }
    }
}

/// A `[rows, cols]` matrix kept as rows of quantized blocks (`cols` a multiple of the format's
/// [`BlockFormat::block_elems`]), e.g. a GGUF weight in the `[out, in]` layout.
#[derive(Clone)]
pub struct QuantizedMatrix {
    format: BlockFormat,
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

impl QuantizedMatrix {
    /// Wraps `data`, checking that it holds exactly `rows × cols` weights of `format`.
    pub fn new(
        format: BlockFormat,
        rows: usize,
        cols: usize,
        data: Vec<u8>,
    ) -> Result<Self, String> {
        let be = format.block_elems();
        if !cols.is_multiple_of(be) {
            return Err(format!(
                "{cols} columns are not a whole number of {format:?} blocks ({be} weights)"
            ));
        }
        let want = rows * cols / be * format.block_bytes();
        if data.len() != want {
            return Err(format!(
                "{} bytes for a {rows}×{cols} {format:?} matrix, which needs {want}",
                data.len()
            ));
        }
        Ok(Self {
            format,
            rows,
            cols,
            data,
        })
    }

    /// The block format.
    pub fn format(&self) -> BlockFormat {
        self.format
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.cols / self.format.block_elems() * self.format.block_bytes()
    }

    /// The blocks of row `r`.
    pub fn row_bytes_of(&self, r: usize) -> &[u8] {
        let rb = self.row_bytes();
        &self.data[r * rb..(r + 1) * rb]
    }

    /// Dequantizes rows `r0..r0 + out.len() / cols` into `out`.
    pub fn dequantize_rows(&self, r0: usize, out: &mut [f32]) {
        let rb = self.row_bytes();
        let n = out.len() / self.cols.max(1);
        self.format
            .dequantize_into(&self.data[r0 * rb..(r0 + n) * rb], out);
    }

    /// Asks the CPU to start loading rows `r0..r0 + n` into cache (a hint; no effect past the
    /// end or off x86-64).
    pub fn prefetch_rows(&self, r0: usize, n: usize) {
        let rb = self.row_bytes();
        let end = ((r0 + n) * rb).min(self.data.len());
        #[cfg(target_arch = "x86_64")]
        for off in (r0 * rb..end).step_by(64) {
            // SAFETY: `off` is inside `data`; prefetching never faults.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    self.data.as_ptr().add(off) as *const i8,
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = end;
    }

    /// The whole matrix in f32, row-major.
    pub fn to_f32(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        self.dequantize_rows(0, &mut out);
        out
    }
}

impl std::fmt::Debug for QuantizedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "QuantizedMatrix({:?}, {}×{})",
            self.format, self.rows, self.cols
        )
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::*;

    use super::{BLOCK_ELEMS, BlockFormat};

    /// The little-endian f16 at `p`, widened (exactly) to f32 by F16C, inline.
    ///
    /// # Safety
    /// `p` points to two readable bytes.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn f16_at(p: *const u8) -> __m256 {
        // SAFETY: two readable bytes.
        _mm256_set1_ps(unsafe { f16(p) })
    }

    /// The little-endian f16 at `p`, widened (exactly, as `half` does) by F16C.
    ///
    /// # Safety
    /// F16C present; `p` points to two readable bytes.
    #[target_feature(enable = "avx2,f16c")]
    #[inline]
    pub(crate) unsafe fn f16(p: *const u8) -> f32 {
        // SAFETY: two readable bytes.
        let bits = unsafe { std::ptr::read_unaligned(p as *const u16) };
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }

    /// Eight integers as f32, `· d`, and for Q4_1 `+ m`: one exactly rounded multiply and one
    /// exactly rounded add, as the portable path; stored at `out`.
    ///
    /// # Safety
    /// `out` has room for 8 values.
    #[target_feature(enable = "avx2,f16c")]
    #[inline]
    unsafe fn store_scaled<const MIN: bool>(ints: __m256i, d: __m256, m: __m256, out: *mut f32) {
        let v = _mm256_mul_ps(_mm256_cvtepi32_ps(ints), d);
        let v = if MIN { _mm256_add_ps(v, m) } else { v };
        // SAFETY: room for 8 values.
        unsafe { _mm256_storeu_ps(out, v) };
    }

    /// The 4- and 5-bit formats: `MIN` for Q4_1 and Q5_1 (`q·d + m`), else Q4_0 and Q5_0
    /// (`(q - 8)·d`, `(q - 16)·d`); `FIVE` for the 5-bit ones, whose fifth bit per value comes
    /// from the block's 32 high bits (as [`crate::kquants`]' portable code).
    ///
    /// # Safety
    /// AVX2 + F16C present; `blocks` whole blocks, `out` their values.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn nibbles<const MIN: bool, const FIVE: bool>(blocks: &[u8], out: &mut [f32]) {
        let bb = 18 + if MIN { 2 } else { 0 } + if FIVE { 4 } else { 0 };
        let mask = _mm_set1_epi8(0x0F);
        let high = _mm_set1_epi8(0x10);
        let bias = _mm256_set1_epi32(if FIVE { 16 } else { 8 });
        for (i, o) in out.chunks_exact_mut(BLOCK_ELEMS).enumerate() {
            // SAFETY: block i has bb bytes; o has 32 values.
            unsafe {
                let b = blocks.as_ptr().add(i * bb);
                let d = f16_at(b);
                let (m, rest) = if MIN {
                    (f16_at(b.add(2)), b.add(4))
                } else {
                    (_mm256_setzero_ps(), b.add(2))
                };
                let qs = if FIVE { rest.add(4) } else { rest };
                let q = _mm_loadu_si128(qs as *const __m128i);
                let lo = _mm_and_si128(q, mask);
                let hi = _mm_and_si128(_mm_srli_epi16::<4>(q), mask);
                let (lo, hi) = if FIVE {
                    let bits = fifth_bits(std::ptr::read_unaligned(rest as *const u32));
                    let (bl, bh) = (
                        _mm256_castsi256_si128(bits),
                        _mm256_extracti128_si256::<1>(bits),
                    );
                    (
                        _mm_or_si128(lo, _mm_and_si128(bl, high)),
                        _mm_or_si128(hi, _mm_and_si128(bh, high)),
                    )
                } else {
                    (lo, hi)
                };
                let o = o.as_mut_ptr();
                for (j, bytes) in [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)]
                    .into_iter()
                    .enumerate()
                {
                    let ints = _mm256_cvtepu8_epi32(bytes);
                    let ints = if MIN {
                        ints
                    } else {
                        _mm256_sub_epi32(ints, bias)
                    };
                    store_scaled::<MIN>(ints, d, m, o.add(8 * j));
                }
            }
        }
    }

    /// Byte `e` of the result is `0xFF` where bit `e` of `qh` is set, else 0 (llama.cpp's
    /// `bytes_from_bits_32`).
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn fifth_bits(qh: u32) -> __m256i {
        let bytes = _mm256_shuffle_epi8(
            _mm256_set1_epi32(qh as i32),
            _mm256_setr_epi64x(
                0,
                0x0101_0101_0101_0101,
                0x0202_0202_0202_0202,
                0x0303_0303_0303_0303,
            ),
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit)
    }

    /// Sub-block `j` (0..8) of the Q4_K (`HIGH = false`) or Q5_K super-block at `b` as 32
    /// unsigned bytes, in order: nibbles of `qs[32 (j / 2)..]` (low for even `j`), and for
    /// Q5_K bit `j` of each of the 32 high-bit bytes as the fifth bit ([`crate::kquants`]).
    ///
    /// # Safety
    /// AVX2 present; `b` points to one whole super-block.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) unsafe fn k4_bytes<const HIGH: bool>(b: *const u8, j: usize) -> __m256i {
        // SAFETY: one whole super-block at b.
        unsafe {
            let low = _mm256_set1_epi8(0x0F);
            let qs = if HIGH { 48 } else { 16 };
            let q = _mm256_loadu_si256(b.add(qs + 32 * (j / 2)) as *const __m256i);
            let q = if j.is_multiple_of(2) {
                _mm256_and_si256(q, low)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(q), low)
            };
            if !HIGH {
                return q;
            }
            let qh = _mm256_loadu_si256(b.add(16) as *const __m256i);
            let shift = _mm_cvtsi32_si128(j as i32);
            let one = _mm256_and_si256(_mm256_srl_epi16(qh, shift), _mm256_set1_epi8(1));
            _mm256_or_si256(q, _mm256_slli_epi16::<4>(one))
        }
    }

    /// Values `32 j..32 j + 32` (`j` in 0..8) of the Q6_K super-block at `b` as signed bytes
    /// `q - 32`, in order ([`crate::kquants`]: half `j / 4`, element `l + 32 (j % 4)`).
    ///
    /// # Safety
    /// AVX2 present; `b` points to one whole super-block.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) unsafe fn q6_bytes(b: *const u8, j: usize) -> __m256i {
        // SAFETY: one whole super-block at b.
        unsafe {
            let (half, k) = (j / 4, j % 4);
            let low = _mm256_set1_epi8(0x0F);
            let ql = _mm256_loadu_si256(b.add(64 * half + 32 * (k % 2)) as *const __m256i);
            let nibble = if k < 2 {
                _mm256_and_si256(ql, low)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql), low)
            };
            let qh = _mm256_loadu_si256(b.add(128 + 32 * half) as *const __m256i);
            let shift = _mm_cvtsi32_si128(2 * k as i32);
            let high = _mm256_and_si256(_mm256_srl_epi16(qh, shift), _mm256_set1_epi8(3));
            let q = _mm256_or_si256(nibble, _mm256_slli_epi16::<4>(high));
            _mm256_sub_epi8(q, _mm256_set1_epi8(32))
        }
    }

    /// The K-quants Q4_K, Q5_K (`KIND` 4, 5: `(d·sc)·q - dmin·m` per sub-block of 32) and Q6_K
    /// (`KIND` 6: `(d·sc)·(q - 32)` per 16), each product and difference exactly rounded as
    /// [`crate::kquants`]' portable code.
    ///
    /// # Safety
    /// AVX2 + F16C present; `blocks` whole super-blocks, `out` their values.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn kquant<const KIND: u8>(blocks: &[u8], out: &mut [f32]) {
        let bb = match KIND {
            4 => crate::kquants::Q4_K_BYTES,
            5 => crate::kquants::Q5_K_BYTES,
            _ => crate::kquants::Q6_K_BYTES,
        };
        for (i, o) in out.chunks_exact_mut(256).enumerate() {
            // SAFETY: super-block i has bb bytes; o has 256 values.
            unsafe {
                let b = blocks.as_ptr().add(i * bb);
                for j in 0..8 {
                    let o = o.as_mut_ptr().add(32 * j);
                    if KIND == 6 {
                        let d = f16(b.add(208));
                        let q = q6_bytes(b, j);
                        let sc = b.add(192 + 8 * (j / 4) + 2 * (j % 4));
                        let halves = [_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q)];
                        for (h, bytes) in halves.into_iter().enumerate() {
                            let s = _mm256_set1_ps(d * *sc.add(h) as i8 as f32);
                            for (c, part) in
                                [bytes, _mm_srli_si128::<8>(bytes)].into_iter().enumerate()
                            {
                                let v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part));
                                _mm256_storeu_ps(o.add(16 * h + 8 * c), _mm256_mul_ps(s, v));
                            }
                        }
                        continue;
                    }
                    let s = std::slice::from_raw_parts(b.add(4), 12);
                    let (sc, m) = crate::kquants::scale_min_bits(s, j);
                    let d0 = _mm256_set1_ps(f16(b) * sc as f32);
                    let m0 = _mm256_set1_ps(f16(b.add(2)) * m as f32);
                    let q = if KIND == 5 {
                        k4_bytes::<true>(b, j)
                    } else {
                        k4_bytes::<false>(b, j)
                    };
                    let halves = [_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q)];
                    for (h, bytes) in halves.into_iter().enumerate() {
                        for (c, part) in [bytes, _mm_srli_si128::<8>(bytes)].into_iter().enumerate()
                        {
                            let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(part));
                            let v = _mm256_sub_ps(_mm256_mul_ps(d0, v), m0);
                            _mm256_storeu_ps(o.add(16 * h + 8 * c), v);
                        }
                    }
                }
            }
        }
    }

    /// Q8_0.
    ///
    /// # Safety
    /// AVX2 + F16C present; `blocks` whole blocks, `out` their values.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn bytes(blocks: &[u8], out: &mut [f32]) {
        let zero = _mm256_setzero_ps();
        for (i, o) in out.chunks_exact_mut(BLOCK_ELEMS).enumerate() {
            // SAFETY: block i has 34 bytes; o has 32 values.
            unsafe {
                let b = blocks.as_ptr().add(i * 34);
                let d = f16_at(b);
                let o = o.as_mut_ptr();
                for j in 0..4 {
                    let q = _mm_loadl_epi64(b.add(2 + 8 * j) as *const __m128i);
                    store_scaled::<false>(_mm256_cvtepi8_epi32(q), d, zero, o.add(8 * j));
                }
            }
        }
    }

    /// # Safety
    /// AVX2 + F16C present; `blocks` whole blocks of `format`, `out` their values.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn dequantize(format: BlockFormat, blocks: &[u8], out: &mut [f32]) {
        // SAFETY: forwarded.
        unsafe {
            match format {
                BlockFormat::Q4_0 => nibbles::<false, false>(blocks, out),
                BlockFormat::Q4_1 => nibbles::<true, false>(blocks, out),
                BlockFormat::Q8_0 => bytes(blocks, out),
                BlockFormat::Q5_0 => nibbles::<false, true>(blocks, out),
                BlockFormat::Q5_1 => nibbles::<true, true>(blocks, out),
                BlockFormat::Q4_K => kquant::<4>(blocks, out),
                BlockFormat::Q5_K => kquant::<5>(blocks, out),
                BlockFormat::Q6_K => kquant::<6>(blocks, out),
            }
        }
    }
}

/// Dequantization of the 4- and 8-bit formats with AVX-512F: sixteen values per instruction
/// where AVX2 takes eight, the same exactly rounded multiply and add per value (so the same
/// bits). A decode step at batch 1 dequantizes every weight it reads (measured: SmolLM2's exact
/// batch-1 decode spent ~45 % of its time there with AVX2).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{BLOCK_ELEMS, BlockFormat};
    use crate::blocks::avx2::f16;

    /// Whether this path dequantizes `format` on this CPU.
    pub(super) fn covers(format: BlockFormat) -> bool {
        matches!(
            format,
            BlockFormat::Q4_0 | BlockFormat::Q4_1 | BlockFormat::Q8_0
        ) && std::arch::is_x86_feature_detected!("avx512f")
    }

    /// Sixteen integers as f32, `· d`, and for Q4_1 `+ m`, stored at `out`.
    ///
    /// # Safety
    /// AVX-512F present; `out` has room for 16 values.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store_scaled<const MIN: bool>(ints: __m512i, d: __m512, m: __m512, out: *mut f32) {
        let v = _mm512_mul_ps(_mm512_cvtepi32_ps(ints), d);
        let v = if MIN { _mm512_add_ps(v, m) } else { v };
        // SAFETY: room for 16 values.
        unsafe { _mm512_storeu_ps(out, v) };
    }

    /// # Safety
    /// AVX-512F and F16C present; `blocks` whole blocks of a covered `format`, `out` their
    /// values.
    #[target_feature(enable = "avx512f,avx2,f16c")]
    pub(super) unsafe fn dequantize(format: BlockFormat, blocks: &[u8], out: &mut [f32]) {
        let bb = format.block_bytes();
        let mask = _mm_set1_epi8(0x0F);
        let eight = _mm512_set1_epi32(8);
        for (i, o) in out.chunks_exact_mut(BLOCK_ELEMS).enumerate() {
            // SAFETY: block i has bb bytes; o has 32 values.
            unsafe {
                let b = blocks.as_ptr().add(i * bb);
                let d = _mm512_set1_ps(f16(b));
                let o = o.as_mut_ptr();
                match format {
                    BlockFormat::Q8_0 => {
                        for j in 0..2 {
                            let q = _mm_loadu_si128(b.add(2 + 16 * j) as *const __m128i);
                            let ints = _mm512_cvtepi8_epi32(q);
                            store_scaled::<false>(ints, d, d, o.add(16 * j));
                        }
                    }
                    BlockFormat::Q4_0 | BlockFormat::Q4_1 => {
                        let q4_1 = format == BlockFormat::Q4_1;
                        let (m, qs) = if q4_1 {
                            (_mm512_set1_ps(f16(b.add(2))), b.add(4))
                        } else {
                            (_mm512_setzero_ps(), b.add(2))
                        };
                        let q = _mm_loadu_si128(qs as *const __m128i);
                        let lo = _mm_and_si128(q, mask);
                        let hi = _mm_and_si128(_mm_srli_epi16::<4>(q), mask);
                        for (j, bytes) in [lo, hi].into_iter().enumerate() {
                            let ints = _mm512_cvtepu8_epi32(bytes);
                            if q4_1 {
                                store_scaled::<true>(ints, d, m, o.add(16 * j));
                            } else {
                                let ints = _mm512_sub_epi32(ints, eight);
                                store_scaled::<false>(ints, d, m, o.add(16 * j));
                            }
                        }
                    }
                    other => unreachable!("{other:?}: not covered (see `covers`)"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    fn h(v: f32) -> [u8; 2] {
        f16::from_f32(v).to_bits().to_le_bytes()
    }

    /// Blocks of every format with pseudo-random payloads and scales.
    fn random_blocks(format: BlockFormat, n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed.wrapping_mul(2_654_435_761) | 1;
        let mut byte = || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 24) as u8
        };
        // Random bytes, then each block's f16 fields a scale (and a minimum where it has one).
        let bb = format.block_bytes();
        let mut out: Vec<u8> = (0..n * bb).map(|_| byte()).collect();
        for (i, b) in out.chunks_exact_mut(bb).enumerate() {
            for (j, &at) in format.f16_fields().iter().enumerate() {
                let v = if j == 0 {
                    0.001 + i as f32 * 0.0137
                } else {
                    -0.05 * i as f32
                };
                b[at..at + 2].copy_from_slice(&h(v));
            }
        }
        out
    }

    #[test]
    fn q4_0_block_by_hand() {
        // d = 0.5; byte j holds low nibble j % 16 and high nibble 15 - j % 16.
        let mut b = h(0.5).to_vec();
        for j in 0..16u8 {
            b.push(j | ((15 - j) << 4));
        }
        let mut w = [0.0; 32];
        BlockFormat::Q4_0.dequantize_into(&b, &mut w);
        for j in 0..16 {
            assert_eq!(w[j], (j as f32 - 8.0) * 0.5, "low nibble {j}");
            assert_eq!(w[16 + j], ((15 - j) as f32 - 8.0) * 0.5, "high nibble {j}");
        }
    }

    #[test]
    fn q4_1_block_by_hand() {
        // d = 0.25, m = -1.0: w = q/4 - 1.
        let mut b = h(0.25).to_vec();
        b.extend(h(-1.0));
        for j in 0..16u8 {
            b.push(((j * 7) % 16) | (j << 4));
        }
        let mut w = [0.0; 32];
        BlockFormat::Q4_1.dequantize_into(&b, &mut w);
        for j in 0..16 {
            assert_eq!(w[j], ((j * 7) % 16) as f32 * 0.25 - 1.0);
            assert_eq!(w[16 + j], j as f32 * 0.25 - 1.0);
        }
    }

    #[test]
    fn q8_0_block_by_hand() {
        let mut b = h(0.125).to_vec();
        for j in 0..32i32 {
            b.push(((j - 16) * 8) as i8 as u8);
        }
        let mut w = [0.0; 32];
        BlockFormat::Q8_0.dequantize_into(&b, &mut w);
        for (j, v) in w.iter().enumerate() {
            assert_eq!(*v, (j as f32 - 16.0) * 8.0 * 0.125);
        }
    }

    #[test]
    fn simd_and_portable_dequantization_agree_bit_for_bit() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for format in BlockFormat::ALL {
            let blocks = random_blocks(format, 40, 9);
            let mut fast = vec![0.0; 40 * format.block_elems()];
            let mut slow = vec![0.0; 40 * format.block_elems()];
            format.dequantize_into(&blocks, &mut fast);
            format.dequantize_portable(&blocks, &mut slow);
            assert_eq!(bits(&fast), bits(&slow), "{format:?}");
            // Where dequantize_into took AVX-512, the AVX2 path too.
            #[cfg(target_arch = "x86_64")]
            if crate::simd_available() && avx512::covers(format) {
                let mut v = vec![0.0; fast.len()];
                // SAFETY: AVX2 + F16C present (simd_available); lengths as above.
                unsafe { avx2::dequantize(format, &blocks, &mut v) };
                assert_eq!(bits(&v), bits(&slow), "{format:?}, AVX2");
            }
        }
    }

    #[test]
    fn matrices_check_their_size_and_dequantize_by_rows() {
        let data = random_blocks(BlockFormat::Q4_1, 6, 3);
        let m = QuantizedMatrix::new(BlockFormat::Q4_1, 3, 64, data.clone()).unwrap();
        assert_eq!(m.row_bytes(), 40);
        let all = m.to_f32();
        let mut row1 = vec![0.0; 64];
        m.dequantize_rows(1, &mut row1);
        assert_eq!(row1, all[64..128]);
        let e = QuantizedMatrix::new(BlockFormat::Q4_1, 2, 64, data.clone()).unwrap_err();
        assert!(
            e.contains("120 bytes for a 2×64 Q4_1 matrix, which needs 80"),
            "{e}"
        );
        let e = QuantizedMatrix::new(BlockFormat::Q4_1, 3, 60, data).unwrap_err();
        assert!(e.contains("60 columns"), "{e}");
    }
}
