//! `exp` of f32 values as glibc's `expf` computes it on x86-64 CPUs with FMA (its `__expf_fma`,
//! the algorithm of Arm's optimized-routines: `exp(x) = 2^(k/32) · 2^(r/32)` with `k` the
//! nearest integer to `32·x/ln 2`, `2^(k/32)` from a 32-entry table, `2^(r/32)` a cubic
//! polynomial, all in f64, rounded once to f32), as a scalar function and eight values at a
//! time with AVX2.
//!
//! Attention takes one exponential per key and query head — at a 2k-token context on SmolLM2,
//! 550,000 a token — and SwiGLU one per hidden unit ([`silu_mul`]); a libm call per value was
//! the largest part of a decode step's attention, and 7 % of a batch-16 step. Both functions here do exactly the operations of glibc 2.36's `__expf_fma` (the
//! same constants, the same three fused multiply-adds, the same special cases), so they give
//! its bits: checked for every non-positive f32 (all that softmax takes) on the dev machine,
//! see docs/src/command-line.md (`engram bench generate`); the tests check the two functions against each other bit for bit
//! and against f64's `exp`. `f64::mul_add` is a fused multiply-add on every target (a correctly
//! rounded libm `fma` where the CPU has none), so the scalar function gives the same bits
//! everywhere, whatever the platform's own `expf`.

/// `32 / ln 2` (glibc's `InvLn2N`).
const INV_LN2_N: f64 = f64::from_bits(0x4047_1547_652B_82FE);
/// `1.5 · 2^52`: added and subtracted to round to the nearest integer.
const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// The polynomial's coefficients: `2^(r/32) ≈ 1 + C2·r + C1·r² + C0·r³`.
const C0: f64 = f64::from_bits(0x3EBC_6AF8_4B91_2394);
const C1: f64 = f64::from_bits(0x3F2E_BFCE_50FA_C4F3);
const C2: f64 = f64::from_bits(0x3F96_2E42_FF0C_52D6);
/// `bits(2^(i/32)) - (i << 47)` for i in 0..32: adding `k << 47` to entry `k mod 32` gives the
/// bits of `2^(k/32)`.
const TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];
/// Above this `exp` overflows to infinity (`log(2^128)`).
const OVERFLOW: f32 = f32::from_bits(0x42B1_7217);
/// Below this `exp` is 0 (`log(2^-150)`).
const UNDERFLOW: f32 = f32::from_bits(0xC2CF_F1B4);
/// Below this (and from [`UNDERFLOW`]) `exp` is the smallest subnormal (`log(2^-149)`).
const MAY_UNDERFLOW: f32 = f32::from_bits(0xC2CE_8ECF);

/// `exp(x)`, glibc's `__expf_fma` bit for bit (see the module docs).
pub fn expf(x: f32) -> f32 {
    if (x.to_bits() >> 20) & 0x7FF >= 0x42B {
        // |x| ≥ 88, infinities, NaN: glibc's special cases.
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if x.is_nan() || x == f32::INFINITY {
            return x + x;
        }
        if x > OVERFLOW {
            return f32::INFINITY;
        }
        if x < UNDERFLOW {
            return 0.0;
        }
        if x < MAY_UNDERFLOW {
            return f32::from_bits(1);
        }
    }
    let xd = x as f64;
    let kd = INV_LN2_N.mul_add(xd, SHIFT);
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = INV_LN2_N.mul_add(xd, -kd);
    let s = f64::from_bits(TABLE[(ki & 31) as usize].wrapping_add(ki << 47));
    let z = r.mul_add(C0, C1);
    let r2 = r * r;
    let y = r.mul_add(C2, 1.0);
    let y = z.mul_add(r2, y);
    (y * s) as f32
}

/// The sigmoid of `x` by Burn's CPU backend's formula (`1 / (1 + exp(-x))` from 0 up,
/// `exp(x) / (1 + exp(x))` below), with [`expf`].
fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + expf(-x))
    } else {
        let e = expf(x);
        e / (1.0 + e)
    }
}

/// SwiGLU's product `out[i] = (g[i] · sigmoid(g[i])) · u[i]` (`silu(g) · u`), the sigmoid as
/// Burn's CPU backend computes it (with glibc's `expf`: see the module docs), eight values at
/// a time where the CPU has AVX2 — the same bits either way.
///
/// # Panics
/// If the three slices differ in length.
pub fn silu_mul(g: &[f32], u: &[f32], out: &mut [f32]) {
    assert!(
        g.len() == u.len() && g.len() == out.len(),
        "silu_mul: {} gates, {} ups, {} outputs",
        g.len(),
        u.len(),
        out.len()
    );
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::simd_available() {
        // SAFETY: AVX2 and FMA are present (checked above); the lengths are equal.
        done = unsafe { avx2::silu_mul(g, u, out) };
    }
    for ((o, &gv), &uv) in out[done..].iter_mut().zip(&g[done..]).zip(&u[done..]) {
        *o = (gv * sigmoid(gv)) * uv;
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::*;

    use super::*;

    /// Four values of [`expf`]'s main path, as f64.
    #[target_feature(enable = "avx2,fma")]
    fn main_path(x: __m128) -> __m128 {
        let xd = _mm256_cvtps_pd(x);
        let inv = _mm256_set1_pd(INV_LN2_N);
        let shift = _mm256_set1_pd(SHIFT);
        let kd = _mm256_fmadd_pd(inv, xd, shift);
        let ki = _mm256_castpd_si256(kd);
        let kd = _mm256_sub_pd(kd, shift);
        let r = _mm256_fmsub_pd(inv, xd, kd);
        let index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
        // SAFETY: every index is below 32, the table's length.
        let t = unsafe { _mm256_i64gather_epi64::<8>(TABLE.as_ptr() as *const i64, index) };
        let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
        let z = _mm256_fmadd_pd(r, _mm256_set1_pd(C0), _mm256_set1_pd(C1));
        let r2 = _mm256_mul_pd(r, r);
        let y = _mm256_fmadd_pd(r, _mm256_set1_pd(C2), _mm256_set1_pd(1.0));
        let y = _mm256_fmadd_pd(z, r2, y);
        _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
    }

    /// [`expf`] of eight values.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn exp8(x: __m256) -> __m256 {
        let lo = main_path(_mm256_castps256_ps128(x));
        let hi = main_path(_mm256_extractf128_ps::<1>(x));
        let y = _mm256_set_m128(hi, lo);
        // The special cases, where any value has |x| ≥ 88 (never NaN in a softmax; handled
        // anyway, one value at a time).
        let abs = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF)));
        let big = _mm256_cmp_ps::<_CMP_NLT_UQ>(abs, _mm256_set1_ps(88.0));
        if _mm256_movemask_ps(big) == 0 {
            return y;
        }
        let (mut xs, mut ys) = ([0f32; 8], [0f32; 8]);
        // SAFETY: both arrays hold 8 values.
        unsafe {
            _mm256_storeu_ps(xs.as_mut_ptr(), x);
            _mm256_storeu_ps(ys.as_mut_ptr(), y);
        }
        for (xv, yv) in xs.iter().zip(ys.iter_mut()) {
            if (xv.to_bits() >> 20) & 0x7FF >= 0x42B {
                *yv = expf(*xv);
            }
        }
        // SAFETY: as above.
        unsafe { _mm256_loadu_ps(ys.as_ptr()) }
    }

    /// [`super::silu_mul`] over whole groups of eight; returns how many values it wrote.
    ///
    /// # Safety
    /// AVX2 + FMA present; the three slices of one length.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn silu_mul(g: &[f32], u: &[f32], out: &mut [f32]) -> usize {
        let n = g.len() - g.len() % 8;
        let (zero, one) = (_mm256_setzero_ps(), _mm256_set1_ps(1.0));
        let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
        for i in (0..n).step_by(8) {
            // SAFETY: values i..i + 8 of each slice exist.
            unsafe {
                let gv = _mm256_loadu_ps(g.as_ptr().add(i));
                // exp(-x) from 0 up and exp(x) below are both exp(-|x|).
                let e = exp8(_mm256_sub_ps(zero, _mm256_and_ps(gv, abs)));
                let up = _mm256_div_ps(one, _mm256_add_ps(one, e));
                let down = _mm256_div_ps(e, _mm256_add_ps(one, e));
                let sig = _mm256_blendv_ps(down, up, _mm256_cmp_ps::<_CMP_GE_OQ>(gv, zero));
                let v = _mm256_mul_ps(_mm256_mul_ps(gv, sig), _mm256_loadu_ps(u.as_ptr().add(i)));
                _mm256_storeu_ps(out.as_mut_ptr().add(i), v);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every 4099th bit pattern of the f32s, both signs, and the edges of the special cases.
    fn sample() -> Vec<f32> {
        let mut v: Vec<f32> = (0..u32::MAX / 4099)
            .map(|i| f32::from_bits(i * 4099))
            .collect();
        for edge in [OVERFLOW, UNDERFLOW, MAY_UNDERFLOW, 88.0, -88.0, 0.0, -0.0] {
            let b = edge.to_bits();
            v.extend((b.saturating_sub(3)..=b.saturating_add(3)).map(f32::from_bits));
        }
        v.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN,
            f32::MAX,
        ]);
        v
    }

    #[test]
    fn is_exp_to_within_an_ulp() {
        for x in sample() {
            let got = expf(x);
            let want = (x as f64).exp();
            if x.is_nan() {
                assert!(got.is_nan());
                continue;
            }
            // An f32 within one unit in the last place of the exact value (the smallest
            // subnormal below the normal range; or both beyond the range).
            let ulp = ((want as f32).abs() * f32::EPSILON).max(f32::from_bits(1));
            let err = (got as f64 - want).abs();
            assert!(
                err <= ulp as f64 || (want > f32::MAX as f64 && got == f32::INFINITY),
                "exp({x:e}) = {got:e}, not {want:e}"
            );
        }
    }

    #[test]
    fn silu_mul_is_the_scalar_formula_eight_at_a_time() {
        // Both signs, zeros, large values (exp over- and underflowing), NaN, and a length that
        // leaves a tail for the scalar loop.
        let mut g: Vec<f32> = sample().into_iter().step_by(97).collect();
        g.extend([0.0, -0.0, 88.7, -88.7, 1e30, -1e30, f32::NAN]);
        let u: Vec<f32> = (0..g.len()).map(|i| (i % 13) as f32 * 0.37 - 2.0).collect();
        let mut out = vec![0f32; g.len()];
        silu_mul(&g, &u, &mut out);
        for ((o, &gv), &uv) in out.iter().zip(&g).zip(&u) {
            let want = (gv * sigmoid(gv)) * uv;
            assert!(
                o.to_bits() == want.to_bits() || (o.is_nan() && want.is_nan()),
                "silu({gv:e}) · {uv}: {o:e}, not {want:e}"
            );
        }
        assert_eq!(sigmoid(0.0), 0.5);
        assert!((sigmoid(2.0) as f64 - 1.0 / (1.0 + (-2f64).exp())).abs() < 1e-7);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn eight_at_a_time_gives_the_same_bits() {
        if !crate::simd_available() {
            eprintln!("SKIPPED: no AVX2 on this CPU");
            return;
        }
        for chunk in sample().chunks(8) {
            let mut x = [0f32; 8];
            x[..chunk.len()].copy_from_slice(chunk);
            let mut y = [0f32; 8];
            // SAFETY: AVX2 and FMA are present (checked above); both arrays hold 8 values.
            unsafe {
                use std::arch::x86_64::*;
                let v = avx2::exp8(_mm256_loadu_ps(x.as_ptr()));
                _mm256_storeu_ps(y.as_mut_ptr(), v);
            }
            for (a, b) in x.iter().zip(y) {
                assert_eq!(b.to_bits(), expf(*a).to_bits(), "exp({a:e})");
            }
        }
    }
}
