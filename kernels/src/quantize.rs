//! Writing GGML's blocks: f32 weights quantized into any [`BlockFormat`] engram reads, with the
//! arithmetic of llama.cpp's reference quantizers (`quantize_row_*_ref` in `ggml-quants.c`, the
//! code `llama-quantize` runs when it is given no importance matrix): the same f32 operations in
//! the same order, the same rounding (`roundf`, truncating casts, and the `nearest_int` trick's
//! round-half-to-even), scales stored as f16 rounded to nearest. The bytes are therefore
//! llama.cpp's own, which a test checks against llama.cpp's library on random and real weights.
//!
//! The 32-weight formats are here; the K-quants' scale searches are in [`crate::kquantize`].

use crate::blocks::BlockFormat;
use crate::fields::put_f16;
use crate::kquantize;

/// `values` quantized into `format` as llama.cpp's reference quantizer writes them: whole blocks
/// of [`BlockFormat::block_elems`] values each, [`BlockFormat::block_bytes`] bytes each, in
/// order (for a matrix stored `[out, in]`, row after row).
///
/// # Panics
/// If `values` is not a whole number of blocks.
pub fn quantize(format: BlockFormat, values: &[f32]) -> Vec<u8> {
    let be = format.block_elems();
    assert!(
        values.len().is_multiple_of(be),
        "{format:?}: {} values are not a whole number of {be}-weight blocks",
        values.len()
    );
    let mut out = vec![0u8; values.len() / be * format.block_bytes()];
    let blocks = values
        .chunks_exact(be)
        .zip(out.chunks_exact_mut(format.block_bytes()));
    for (x, y) in blocks {
        match format {
            BlockFormat::Q4_0 => symmetric::<4>(x, y),
            BlockFormat::Q5_0 => symmetric::<5>(x, y),
            BlockFormat::Q4_1 => with_min::<4>(x, y),
            BlockFormat::Q5_1 => with_min::<5>(x, y),
            BlockFormat::Q8_0 => q8_0(x, y),
            BlockFormat::Q4_K => kquantize::q45_k::<false>(x, y),
            BlockFormat::Q5_K => kquantize::q45_k::<true>(x, y),
            BlockFormat::Q6_K => kquantize::q6_k(x, y),
        }
    }
    out
}

/// Q8_0: `d = max|x| / 127`, `q = round(x / d)` (half away from zero, as `roundf`).
fn q8_0(x: &[f32], y: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(y, d);
    for (q, v) in y[2..].iter_mut().zip(x) {
        *q = (v * id).round() as i8 as u8;
    }
}

/// The element of largest magnitude, signed (the first one on a tie).
fn signed_max(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// Q4_0 (`BITS` 4) and Q5_0 (`BITS` 5): `d = max / -2^(BITS-1)` with `max` the signed element
/// of largest magnitude, `q = min(2^BITS - 1, trunc(x/d + 2^(BITS-1) + ½))`.
fn symmetric<const BITS: u32>(x: &[f32], y: &mut [u8]) {
    let half = (1u32 << (BITS - 1)) as f32;
    let top = (1i32 << BITS) - 1;
    let d = signed_max(x) / -half;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(y, d);
    let q = |v: f32| ((v * id + half + 0.5) as i8 as i32).min(top) as u8;
    pack_nibbles::<BITS>(x, q, &mut y[2..]);
}

/// Q4_1 (`BITS` 4) and Q5_1 (`BITS` 5): `d = (max - min) / (2^BITS - 1)`, `m = min`,
/// `q = trunc((x - min)/d + ½)` (capped at 15 for Q4_1, as llama.cpp caps it).
fn with_min<const BITS: u32>(x: &[f32], y: &mut [u8]) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        min = min.min(v);
        max = max.max(v);
    }
    let d = (max - min) / ((1u32 << BITS) - 1) as f32;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(y, d);
    put_f16(&mut y[2..], min);
    let q = |v: f32| {
        let r = (v - min) * id + 0.5;
        if BITS == 4 {
            (r as i8 as i32).min(15) as u8
        } else {
            r as u8
        }
    };
    pack_nibbles::<BITS>(x, q, &mut y[4..]);
}

/// The 32 values `q(x)` as GGML's 4- or 5-bit layout: for `BITS` 5 first the 32 fifth bits
/// (bit `j` for element `j`), then 16 bytes whose low nibble is element `j` and high nibble
/// element `16 + j`.
fn pack_nibbles<const BITS: u32>(x: &[f32], q: impl Fn(f32) -> u8, out: &mut [u8]) {
    let mut qh = 0u32;
    let nibbles = if BITS == 5 { 4 } else { 0 };
    for j in 0..16 {
        let (a, b) = (q(x[j]), q(x[16 + j]));
        out[nibbles + j] = (a & 0x0F) | ((b & 0x0F) << 4);
        qh |= (((a & 0x10) >> 4) as u32) << j;
        qh |= (((b & 0x10) >> 4) as u32) << (j + 16);
    }
    if BITS == 5 {
        out[..4].copy_from_slice(&qh.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values of varied scale with occasional outliers, zeros and exact ties.
    fn weights(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        (0..n)
            .map(|i| {
                let scale = 0.02 * (1.0 + (i / 256) as f32);
                match i % 97 {
                    0 => 0.0,
                    1 => 8.0 * scale,
                    _ => next() * scale,
                }
            })
            .collect()
    }

    /// Quantized and read back, every format is within its step of the input: half a step for
    /// the formats that round to the nearest level (Q8_0, the `_1` formats), a step for the
    /// rest, whose levels a search or a truncation picks.
    #[test]
    fn every_format_reads_back_within_its_step() {
        let x = weights(4096, 7);
        for f in BlockFormat::ALL {
            let q = quantize(f, &x);
            assert_eq!(q.len(), x.len() / f.block_elems() * f.block_bytes());
            let mut back = vec![0.0; x.len()];
            f.dequantize_into(&q, &mut back);
            let levels = match f {
                BlockFormat::Q8_0 => 254.0,
                BlockFormat::Q4_0 | BlockFormat::Q4_1 | BlockFormat::Q4_K => 15.0,
                BlockFormat::Q5_0 | BlockFormat::Q5_1 | BlockFormat::Q5_K => 31.0,
                BlockFormat::Q6_K => 63.0,
            };
            for (blk, (a, b)) in x
                .chunks(f.block_elems())
                .zip(back.chunks(f.block_elems()))
                .enumerate()
            {
                let (lo, hi) = a
                    .iter()
                    .fold((0.0f32, 0.0f32), |(l, h), &v| (l.min(v), h.max(v)));
                // The widest range a block's levels may have to span (the symmetric formats
                // span twice the largest magnitude).
                let span = 2.0 * lo.abs().max(hi.abs());
                let step = span / levels;
                let worst = a
                    .iter()
                    .zip(b)
                    .map(|(u, v)| (u - v).abs())
                    .fold(0.0, f32::max);
                assert!(
                    worst <= 1.01 * step + 1e-6,
                    "{f:?} block {blk}: error {worst} over a step of {step}"
                );
            }
        }
    }

    #[test]
    fn an_all_zero_block_stays_zero() {
        for f in BlockFormat::ALL {
            let x = vec![0.0; f.block_elems()];
            let mut back = vec![1.0; x.len()];
            f.dequantize_into(&quantize(f, &x), &mut back);
            assert!(back.iter().all(|&v| v == 0.0), "{f:?}: {back:?}");
        }
    }
}
