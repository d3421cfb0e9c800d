//! `y[M, N] = x[M, K] · w[N, K]ᵀ` in f32 on the CPU, for inference's skinny products.
//!
//! Why it exists: a batch-16 decode step of SmolLM2 multiplies 16 rows by every weight matrix
//! (~540 MB in f32), so it is bound by how fast the weights reach the arithmetic units. A
//! general GEMM (the `gemm` crate behind Burn's CPU backend) packs the weight into column
//! panels on every call. Measured on the 2-core dev machine, all 30 layers' products of one
//! step with cold weights (SmolLM2's shapes, 16 rows): `gemm` on the `[in, out]` layout ~200 ms,
//! `gemm` on the `[out, in]` layout ~127 ms, this kernel ~80 ms on f32 weights and ~65 ms on
//! Q4_1 blocks ([`matmul_nt_quantized`]; at 1 row: 48 ms f32, 26 ms Q4_1). It reads the weight
//! in the `[out, in]` layout checkpoints store: each output column is a dot product of a
//! contiguous weight row with each input row, so the weight streams sequentially, once.
//!
//! Shape of the computation:
//! - Output columns are split into chunks run in parallel on rayon's global pool (the pool Burn's
//!   CPU backend uses); products too small to pay for a fork run on the calling thread.
//! - Within a chunk, rows go in blocks of [`ROW_BLOCK`] (so a block of `x` stays in L2 while the
//!   chunk's weight rows stream past it), and each block in tiles of 4 rows × 3 weight rows:
//!   12 accumulators of 8 lanes, 7 loads per 12 fused multiply-adds.
//! - Quantized weights are dequantized 3 rows at a time into an L1-sized buffer that the tiles
//!   read, while the next 3 rows are prefetched.
//! - Each dot product accumulates 8 lanes over `K` rounded down to a multiple of 8, sums the
//!   lanes in a fixed order, then adds the remaining `K mod 8` products in order.
//!
//! The AVX2 + FMA (+ F16C) path is chosen at run time; elsewhere a portable path computes the
//! same sums in the same order (its results are bit-identical, which the tests check), but
//! without explicit SIMD. [`simd_available`] tells callers which one runs.

use rayon::prelude::*;

use crate::blocks::QuantizedMatrix;

/// Rows of `x` per block (see the module docs).
pub const ROW_BLOCK: usize = 64;

/// Rows of `x` per tile.
const MR: usize = 4;
/// Weight rows (output columns) per tile.
const NR: usize = 3;
/// Lanes per accumulator.
pub(crate) const LANES: usize = 8;
/// Multiply-adds below which the product runs on the calling thread. What a split costs
/// depends on where it is called from: from a thread outside rayon's pool the caller sleeps
/// while the pool's threads are woken (tens of microseconds on a small VM, so 2²⁰ measured best
/// there: SmolLM2's Q8 decode at batch 1, 2 threads, 64–83 tok/s vs 45–63 at 2¹⁸); from a
/// thread of the pool, as the `engram` binary runs every command, the caller works on its half
/// while the other is stolen. There, at 2¹⁶ (every projection of a SmolLM2 decode step split,
/// k and v at 110 k multiply-adds the smallest), batch-1 decode measured 118–120 tok/s Q8 and
/// 71–75 exact against 88–89 and 47 at 2²⁰ (same machine, same run).
const PARALLEL_MIN_MACS: usize = 1 << 16;
/// Column chunks per thread of a parallel product (work stealing evens out the rest).
const CHUNKS_PER_THREAD: usize = 2;

/// Whether the explicit-SIMD path (AVX2, FMA, F16C: every x86-64 CPU since 2013-2015) runs on
/// this CPU.
pub fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `x[m, k] · w[n, k]ᵀ` as a new row-major `[m, n]` vector.
///
/// # Panics
/// If `x` or `w` does not hold exactly `m·k` or `n·k` values.
pub fn matmul_nt(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    assert_eq!(
        w.len(),
        n * k,
        "matmul_nt: w holds {} values, not {n}×{k}",
        w.len()
    );
    let mut y = vec![0.0; m * n];
    run(x, Weights::F32(w), m, k, n, &mut y);
    y
}

/// `x[m, k] · wᵀ` for a quantized `w: [n, k]`, as a new row-major `[m, n]` vector.
///
/// Each group of weight rows is dequantized once per block of [`ROW_BLOCK`] rows of `x` into a
/// small f32 buffer that the same tiles as [`matmul_nt`] read, so the result is bit-identical
/// to `matmul_nt(x, &w.to_f32(), ..)` while the weight streams from memory at its compact size
/// (5/32 of f32 for Q4_1).
///
/// # Panics
/// If `x` does not hold exactly `m · w.cols()` values.
pub fn matmul_nt_quantized(x: &[f32], w: &QuantizedMatrix, m: usize) -> Vec<f32> {
    let mut y = vec![0.0; m * w.rows()];
    run(x, Weights::Blocks(w), m, w.cols(), w.rows(), &mut y);
    y
}

/// Where the weight rows come from.
#[derive(Clone, Copy)]
enum Weights<'a> {
    /// `[n, k]` f32, row-major.
    F32(&'a [f32]),
    /// `[n, k]` quantized blocks.
    Blocks(&'a QuantizedMatrix),
}

/// Checks `x`/`y`, then runs the column chunks (in parallel when worth it).
fn run(x: &[f32], w: Weights<'_>, m: usize, k: usize, n: usize, y: &mut [f32]) {
    assert_eq!(
        x.len(),
        m * k,
        "matmul_nt: x holds {} values, not {m}×{k}",
        x.len()
    );
    assert_eq!(
        y.len(),
        m * n,
        "matmul_nt: y holds {} values, not {m}×{n}",
        y.len()
    );
    if m == 0 || n == 0 {
        return;
    }
    let simd = simd_available();
    let out = OutPtr(y.as_mut_ptr());
    let run = |c0: usize, c1: usize| {
        // SAFETY: `x`, `w` and `y` have the checked lengths, and each call writes only the
        // output columns `c0..c1`, which no other call shares.
        unsafe { columns(x, w, m, k, n, c0, c1, out.get(), simd) }
    };
    column_chunks(n, m * n * k, NR, run);
}

/// Runs `run(c0, c1)` over chunks of the output columns `0..n` (each a multiple of `align`
/// wide but the last): on the calling thread for a product of fewer than
/// [`PARALLEL_MIN_MACS`] multiply-adds, else [`CHUNKS_PER_THREAD`] chunks per thread on rayon's
/// pool, so that work stealing evens out uneven progress.
pub(crate) fn column_chunks(
    n: usize,
    macs: usize,
    align: usize,
    run: impl Fn(usize, usize) + Sync,
) {
    let threads = rayon::current_num_threads().max(1);
    if threads == 1 || macs < PARALLEL_MIN_MACS || n < 2 * align {
        run(0, n);
        return;
    }
    let chunk = n.div_ceil(threads * CHUNKS_PER_THREAD).div_ceil(align) * align;
    (0..n.div_ceil(chunk))
        .into_par_iter()
        .for_each(|i| run(i * chunk, ((i + 1) * chunk).min(n)));
}

/// The output pointer shared by the parallel column chunks.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub(crate) *mut f32);

impl OutPtr {
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: the chunks write disjoint columns of the output (see `run`).
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

/// Output columns `c0..c1` of every row.
///
/// # Safety
/// `x` holds `m·k` values, `w` `n` rows of `k`; `y` points to `m·n` writable values; `c1 ≤ n`.
#[allow(clippy::too_many_arguments)]
unsafe fn columns(
    x: &[f32],
    w: Weights<'_>,
    m: usize,
    k: usize,
    n: usize,
    c0: usize,
    c1: usize,
    y: *mut f32,
    simd: bool,
) {
    let mut buf = match w {
        Weights::F32(_) => Vec::new(),
        Weights::Blocks(_) => vec![0.0; NR * k],
    };
    for r0 in (0..m).step_by(ROW_BLOCK) {
        let r1 = (r0 + ROW_BLOCK).min(m);
        let mut c = c0;
        while c < c1 {
            let nr = NR.min(c1 - c);
            let ws = match w {
                // SAFETY: rows c..c+nr ≤ n of k values.
                Weights::F32(w) => unsafe { w.as_ptr().add(c * k) },
                Weights::Blocks(q) => {
                    q.dequantize_rows(c, &mut buf[..nr * k]);
                    // The next group streams in while this one is multiplied.
                    q.prefetch_rows(c + nr, NR.min(c1.saturating_sub(c + nr)));
                    buf.as_ptr()
                }
            };
            let mut r = r0;
            while r < r1 {
                let mr = MR.min(r1 - r);
                // SAFETY: rows r..r+mr < m and columns c..c+nr ≤ c1 ≤ n are in bounds.
                unsafe {
                    let xs = x.as_ptr().add(r * k);
                    let ys = y.add(r * n + c);
                    tile(xs, ws, k, ys, n, mr, nr, simd);
                }
                r += mr;
            }
            c += nr;
        }
    }
}

/// One `mr × nr` tile (`mr ≤ MR`, `nr ≤ NR`), dispatched to a monomorphized kernel.
///
/// # Safety
/// `x` points to `mr` rows of `k` values, `w` to `nr` rows of `k` values, `y` to `mr` rows of
/// stride `ldy` with `nr` writable values each.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile(
    x: *const f32,
    w: *const f32,
    k: usize,
    y: *mut f32,
    ldy: usize,
    mr: usize,
    nr: usize,
    simd: bool,
) {
    macro_rules! dispatch {
        ($($m:literal),*; $($n:literal),*) => {
            dispatch!(@rows [$($m),*] [$($n),*])
        };
        (@rows [$($m:literal),*] $ns:tt) => {
            match mr {
                $($m => dispatch!(@cols $m $ns),)*
                _ => unreachable!("tile rows {mr}"),
            }
        };
        (@cols $m:literal [$($n:literal),*]) => {
            match nr {
                $($n => unsafe { kernel::<$m, $n>(x, w, k, y, ldy, simd) },)*
                _ => unreachable!("tile columns {nr}"),
            }
        };
    }
    dispatch!(1, 2, 3, 4; 1, 2, 3)
}

/// Chooses the SIMD or portable body for an `R × C` tile.
///
/// # Safety
/// As [`tile`], with `mr = R`, `nr = C`; `simd` only where [`simd_available`].
#[inline]
unsafe fn kernel<const R: usize, const C: usize>(
    x: *const f32,
    w: *const f32,
    k: usize,
    y: *mut f32,
    ldy: usize,
    simd: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: the caller checked AVX2 + FMA + F16C; pointers as documented.
        unsafe { avx2::tile::<R, C>(x, w, k, y, ldy) };
        return;
    }
    let _ = simd;
    // SAFETY: pointers as documented.
    unsafe { portable_tile::<R, C>(x, w, k, y, ldy) }
}

/// Sums 8 lanes as the AVX2 path does: `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.
#[inline]
pub(crate) fn lane_sum(l: &[f32; LANES]) -> f32 {
    let a = [l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7]];
    (a[0] + a[2]) + (a[1] + a[3])
}

/// The portable tile: the AVX2 kernel's arithmetic, lane by lane.
///
/// # Safety
/// As [`kernel`].
unsafe fn portable_tile<const R: usize, const C: usize>(
    x: *const f32,
    w: *const f32,
    k: usize,
    y: *mut f32,
    ldy: usize,
) {
    // SAFETY: pointers as documented on `tile`.
    let (xr, wr): ([&[f32]; R], [&[f32]; C]) = unsafe {
        (
            std::array::from_fn(|r| std::slice::from_raw_parts(x.add(r * k), k)),
            std::array::from_fn(|j| std::slice::from_raw_parts(w.add(j * k), k)),
        )
    };
    let k8 = k - k % LANES;
    let mut acc = [[[0.0f32; LANES]; C]; R];
    for kk in (0..k8).step_by(LANES) {
        for r in 0..R {
            for j in 0..C {
                for l in 0..LANES {
                    // fused like the SIMD path: one rounding per multiply-add
                    acc[r][j][l] = xr[r][kk + l].mul_add(wr[j][kk + l], acc[r][j][l]);
                }
            }
        }
    }
    for r in 0..R {
        for j in 0..C {
            let mut s = lane_sum(&acc[r][j]);
            for kk in k8..k {
                s = xr[r][kk].mul_add(wr[j][kk], s);
            }
            // SAFETY: y has R rows of stride ldy with C writable values.
            unsafe { *y.add(r * ldy + j) = s };
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::*;

    use super::LANES;

    /// Lane sum in the order [`super::lane_sum`] documents.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn hsum(v: __m256) -> f32 {
        let a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let b = _mm_add_ps(a, _mm_movehl_ps(a, a));
        _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps::<1>(b, b)))
    }

    /// An `R × C` tile of dot products.
    ///
    /// # Safety
    /// AVX2 + FMA + F16C present; pointers as [`super::tile`] documents.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile<const R: usize, const C: usize>(
        x: *const f32,
        w: *const f32,
        k: usize,
        y: *mut f32,
        ldy: usize,
    ) {
        let k8 = k - k % LANES;
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut kk = 0;
        while kk < k8 {
            // SAFETY: kk + 8 ≤ k, inside each row.
            unsafe {
                let mut wv = [_mm256_setzero_ps(); C];
                for (j, v) in wv.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(w.add(j * k + kk));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let xv = _mm256_loadu_ps(x.add(r * k + kk));
                    for (a, v) in row.iter_mut().zip(&wv) {
                        *a = _mm256_fmadd_ps(xv, *v, *a);
                    }
                }
            }
            kk += LANES;
        }
        for (r, row) in acc.iter().enumerate() {
            for (j, a) in row.iter().enumerate() {
                let mut s = hsum(*a);
                // SAFETY: indices below k inside rows r and j; y as documented.
                unsafe {
                    for t in k8..k {
                        s = (*x.add(r * k + t)).mul_add(*w.add(j * k + t), s);
                    }
                    *y.add(r * ldy + j) = s;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut y = vec![0.0; m * n];
        for r in 0..m {
            for c in 0..n {
                y[r * n + c] = (0..k)
                    .map(|t| x[r * k + t] as f64 * w[c * k + t] as f64)
                    .sum();
            }
        }
        y
    }

    /// Shapes covering every tile remainder, `K` below, at and past a multiple of 8, the row
    /// blocking, and the parallel split.
    const SHAPES: [(usize, usize, usize); 9] = [
        (1, 1, 1),
        (1, 7, 5),
        (2, 8, 3),
        (3, 13, 7),
        (5, 64, 64),
        (16, 576, 192),
        (20, 61, 1001),
        (70, 96, 130),
        (130, 40, 33),
    ];

    #[test]
    fn matches_a_float64_reference() {
        for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
            let x = values(m * k, 2 * i as u64 + 1);
            let w = values(n * k, 2 * i as u64 + 2);
            let y = matmul_nt(&x, &w, m, k, n);
            let want = reference(&x, &w, m, k, n);
            let worst = y
                .iter()
                .zip(&want)
                .map(|(a, b)| (*a as f64 - b).abs())
                .fold(0.0, f64::max);
            // |terms| ≤ 0.25, k ≤ 576: f32 accumulation error stays far below 1e-4.
            assert!(worst < 1e-4, "{m}×{k}×{n}: worst |Δ| {worst:e}");
        }
    }

    #[test]
    fn simd_and_portable_paths_agree_bit_for_bit() {
        if !simd_available() {
            eprintln!("no AVX2 + FMA + F16C on this CPU: only the portable path exists here");
            return;
        }
        for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
            let x = values(m * k, 7 * i as u64 + 3);
            let w = values(n * k, 7 * i as u64 + 4);
            let mut simd = vec![0.0; m * n];
            let mut portable = vec![0.0; m * n];
            unsafe {
                columns(&x, Weights::F32(&w), m, k, n, 0, n, simd.as_mut_ptr(), true);
                columns(
                    &x,
                    Weights::F32(&w),
                    m,
                    k,
                    n,
                    0,
                    n,
                    portable.as_mut_ptr(),
                    false,
                );
            }
            assert_eq!(simd, portable, "{m}×{k}×{n}");
            assert_eq!(
                matmul_nt(&x, &w, m, k, n),
                simd,
                "parallel split {m}×{k}×{n}"
            );
        }
    }

    #[test]
    fn quantized_weights_give_the_dequantized_products_bit_for_bit() {
        use crate::blocks::BlockFormat;
        for (i, format) in BlockFormat::ALL.into_iter().enumerate() {
            // 3 rows of x (one tile remainder), 2 blocks per row, 301 output columns (parallel
            // split with a remainder group); then 70 rows (two row blocks).
            for (m, n) in [(3, 301), (70, 20)] {
                let k = 2 * format.block_elems();
                let bytes: Vec<u8> = values(
                    n * k / format.block_elems() * format.block_bytes(),
                    i as u64,
                )
                .iter()
                .map(|v| (v.to_bits() >> 3) as u8)
                .collect();
                // Sane scales (small positive f16) and minimums in every block header.
                let mut bytes = bytes;
                for b in bytes.chunks_exact_mut(format.block_bytes()) {
                    for (j, &at) in format.f16_fields().iter().enumerate() {
                        let v: u16 = if j == 0 { 0x2C00 } else { 0xB400 }; // 0.0625, -0.25
                        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
                    }
                }
                let q = QuantizedMatrix::new(format, n, k, bytes).unwrap();
                let x = values(m * k, 11 + i as u64);
                let want = matmul_nt(&x, &q.to_f32(), m, k, n);
                let got = matmul_nt_quantized(&x, &q, m);
                assert_eq!(got, want, "{format:?} {m}×{k}×{n}");
            }
        }
    }

    #[test]
    fn empty_products_are_empty_or_zero() {
        assert!(matmul_nt(&[], &[0.0; 6], 0, 3, 2).is_empty());
        assert_eq!(matmul_nt(&[], &[], 2, 0, 3), vec![0.0; 6]);
    }

    #[test]
    #[should_panic(expected = "w holds 5 values, not 2×3")]
    fn wrong_lengths_are_named() {
        matmul_nt(&[0.0; 3], &[0.0; 5], 1, 3, 2);
    }
}
