//! Writing the K-quants (Q4_K, Q5_K, Q6_K: 256-weight super-blocks, [`crate::kquants`] reads
//! them): llama.cpp's reference quantizers without an importance matrix — per sub-block a small
//! search for the scale (and, for Q4_K/Q5_K, the minimum) that minimises the weighted squared
//! error, the sub-block scales then quantized to 6 bits (Q4_K, Q5_K) or 8 bits (Q6_K) against
//! one f16 super-block scale, and every value re-rounded against the scale the reader will see.
//! The f32 operations and their order are llama.cpp's (`make_qkx2_quants`, `make_qx_quants`),
//! so the bytes are too.

use crate::fields::{put_f16, through_f16};
use crate::kquants::{SUPER_BLOCK_ELEMS, scale_min_bits};

/// Rounds to the nearest integer, ties to even, as GGML's `nearest_int` does (valid for
/// |v| < 2²²; the quantizers stay far inside that).
fn nearest_int(v: f32) -> i32 {
    ((v + 12_582_912.0).to_bits() as i32 & 0x007F_FFFF) - 0x0040_0000
}

/// Below this a group's largest magnitude counts as zero (GGML's `GROUP_MAX_EPS`).
const GROUP_MAX_EPS: f32 = 1e-15;

/// Levels `l[i]` in `0..=nmax`, a scale and a minimum with `x ≈ scale·l - min`, chosen by
/// GGML's `make_qkx2_quants` (squared error weighted by `w`, `nstep + 1` trial scales from
/// `(nmax + rmin) / range` in steps of `rdelta / range`). Returns `(scale, min)`.
fn levels_with_min(
    x: &[f32],
    w: &[f32],
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    l: &mut [u8],
) -> (f32, f32) {
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..x.len() {
        min = if x[i] < min { x[i] } else { min };
        max = if x[i] > max { x[i] } else { max };
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let clamp = |v: f32| nearest_int(v).clamp(0, nmax);
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best = 0.0f32;
    for i in 0..x.len() {
        l[i] = clamp(iscale * (x[i] - min)) as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best += w[i] * (diff * diff);
    }
    let mut aux = [0u8; 32];
    let aux = &mut aux[..x.len()];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..x.len() {
            let li = clamp(iscale * (x[i] - min));
            aux[i] = li as u8;
            let wl = w[i] * li as f32;
            sum_l += wl;
            sum_l2 += wl * li as f32;
            sum_xl += wl * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut err = 0.0f32;
            for i in 0..x.len() {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if err < best {
                l.copy_from_slice(aux);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Levels `l[i] - nmax` in `-nmax..nmax` and a signed scale with `x ≈ scale·(l - nmax)`, chosen
/// by GGML's `make_qx_quants` with its `rmse_type` 1 (squared error weighted by `x²`, 19 trial
/// scales around `-nmax / max`). Returns the scale.
fn levels_symmetric(x: &[f32], nmax: i32, l: &mut [u8]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let li = level(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * li;
            suml2 += w * li * li;
        }
        (sumlx, suml2)
    };
    let iscale = -(nmax as f32) / max;
    for (li, &v) in l.iter_mut().zip(x) {
        *li = (level(iscale, v) + nmax) as u8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        let iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (li, &v) in l.iter_mut().zip(x) {
                *li = (level(iscale, v) + nmax) as u8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// One Q4_K (`FIVE = false`: 144 bytes) or Q5_K (`FIVE = true`: 176 bytes) super-block of the
/// 256 values `x`, as `quantize_row_q4_K_ref` / `quantize_row_q5_K_ref`.
pub(crate) fn q45_k<const FIVE: bool>(x: &[f32], y: &mut [u8]) {
    debug_assert_eq!(x.len(), SUPER_BLOCK_ELEMS);
    let (nmax, rmin, nstep) = if FIVE { (31, -0.5, 15) } else { (15, -1.0, 20) };
    let mut l = [0u8; SUPER_BLOCK_ELEMS];
    let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let sum_x2 = xs.iter().fold(0.0f32, |s, v| s + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        let w: [f32; 32] = std::array::from_fn(|i| av_x + xs[i].abs());
        let (sc, m) = levels_with_min(xs, &w, nmax, rmin, 0.1, nstep, &mut l[32 * j..][..32]);
        (scales[j], mins[j]) = (sc, m);
        max_scale = if sc > max_scale { sc } else { max_scale };
        max_min = if m > max_min { m } else { max_min };
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let packed = &mut y[4..16];
    packed.fill(0);
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0x0F) | ((lm & 0x0F) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    put_f16(y, max_scale / 63.0);
    put_f16(&mut y[2..], max_min / 63.0);
    let (d_all, dmin_all) = (through_f16(max_scale / 63.0), through_f16(max_min / 63.0));
    for j in 0..8 {
        let (sc, m) = scale_min_bits(&y[4..16], j);
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * m as f32;
        for i in 32 * j..32 * j + 32 {
            l[i] = nearest_int((x[i] + dm) / d).clamp(0, nmax) as u8;
        }
    }
    if FIVE {
        let (qh, ql) = y[16..].split_at_mut(32);
        qh.fill(0);
        for (k, n) in (0..SUPER_BLOCK_ELEMS).step_by(64).enumerate() {
            let (m1, m2) = (1u8 << (2 * k), 2u8 << (2 * k));
            for j in 0..32 {
                let (mut l1, mut l2) = (l[n + j], l[n + j + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[32 * k + j] = l1 | (l2 << 4);
            }
        }
    } else {
        let q = &mut y[16..];
        for (k, n) in (0..SUPER_BLOCK_ELEMS).step_by(64).enumerate() {
            for j in 0..32 {
                q[32 * k + j] = l[n + j] | (l[n + j + 32] << 4);
            }
        }
    }
}

/// One Q6_K super-block (210 bytes: low nibbles, high bit pairs, 16 signed 8-bit scales, f16
/// `d`) of the 256 values `x`, as `quantize_row_q6_K_ref`.
pub(crate) fn q6_k(x: &[f32], y: &mut [u8]) {
    debug_assert_eq!(x.len(), SUPER_BLOCK_ELEMS);
    let mut l = [0u8; SUPER_BLOCK_ELEMS];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs) = (0.0f32, 0.0f32);
    for ib in 0..16 {
        let s = levels_symmetric(&x[16 * ib..16 * ib + 16], 32, &mut l[16 * ib..][..16]);
        scales[ib] = s;
        if s.abs() > max_abs {
            max_abs = s.abs();
            max_scale = s;
        }
    }
    y.fill(0);
    if max_abs < GROUP_MAX_EPS {
        return;
    }
    let iscale = -128.0 / max_scale;
    put_f16(&mut y[208..], 1.0 / iscale);
    let d_all = through_f16(1.0 / iscale);
    let sc: [i8; 16] = std::array::from_fn(|ib| nearest_int(iscale * scales[ib]).min(127) as i8);
    for (j, &s) in sc.iter().enumerate() {
        y[192 + j] = s as u8;
        let d = d_all * s as f32;
        if d == 0.0 {
            continue;
        }
        for i in 16 * j..16 * j + 16 {
            l[i] = (nearest_int(x[i] / d).clamp(-32, 31) + 32) as u8;
        }
    }
    let (ql, rest) = y.split_at_mut(128);
    let qh = &mut rest[..64];
    for (k, n) in (0..SUPER_BLOCK_ELEMS).step_by(128).enumerate() {
        for j in 0..32 {
            let q = [l[n + j], l[n + j + 32], l[n + j + 64], l[n + j + 96]];
            ql[64 * k + j] = (q[0] & 0x0F) | ((q[2] & 0x0F) << 4);
            ql[64 * k + j + 32] = (q[1] & 0x0F) | ((q[3] & 0x0F) << 4);
            qh[32 * k + j] =
                (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        let got: Vec<i32> = [0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, 7.6]
            .iter()
            .map(|&v| nearest_int(v))
            .collect();
        assert_eq!(got, [0, 2, 2, 0, -2, 2, 8]);
    }

    /// Values already on a Q6_K grid whose every sub-block reaches the grid's most negative
    /// level come back exactly: the search starts from that level's scale and keeps it.
    #[test]
    fn q6_k_keeps_values_on_its_grid() {
        // A power-of-two step, which the f16 super-block scale holds exactly.
        let d = 1.0 / 256.0;
        let x: Vec<f32> = (0..256)
            .map(|i| match i % 16 {
                0 => -32.0 * d,
                _ => (i * 37 % 64 - 32) as f32 * d,
            })
            .collect();
        let mut y = vec![0u8; 210];
        q6_k(&x, &mut y);
        let mut back = vec![0.0; 256];
        crate::kquants::q6_k(&y, &mut back);
        let worst = x
            .iter()
            .zip(&back)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert_eq!(worst, 0.0);
    }
}
