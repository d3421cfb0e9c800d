//! GGML's 5-bit blocks (Q5_0, Q5_1: 32 weights) and its K-quant super-blocks (Q4_K, Q5_K, Q6_K:
//! 256 weights in sub-blocks of 16 or 32 with their own 6- or 8-bit scales) — what most
//! published GGUF files hold (`Q4_K_M` is Q4_K with Q6_K for some tensors, and Q5_0 or Q8_0 for
//! tensors whose rows are not a whole number of 256-weight super-blocks).
//!
//! Dequantized in portable code with llama.cpp's `dequantize_row_*` arithmetic (f32, each
//! product and difference exactly rounded, never fused, in its order: for Q4_K
//! `(d·sc)·q - dmin·m`, for Q6_K `(d·sc)·q`), so the values equal those of llama.cpp's reference
//! code and of gguf-py's NumPy dequantization (tested against it on random blocks).

use crate::fields::f16_at;

/// Weights per K-quant super-block.
pub const SUPER_BLOCK_ELEMS: usize = 256;

/// Bytes of a Q5_0 block: f16 `d`, 32 high bits, 16 bytes of low nibbles.
pub(crate) const Q5_0_BYTES: usize = 22;
/// Bytes of a Q5_1 block: f16 `d`, f16 `m`, 32 high bits, 16 bytes of low nibbles.
pub(crate) const Q5_1_BYTES: usize = 24;
/// Bytes of a Q4_K super-block: f16 `d`, f16 `dmin`, 12 bytes of 6-bit scales and minimums,
/// 128 bytes of nibbles.
pub(crate) const Q4_K_BYTES: usize = 144;
/// Bytes of a Q5_K super-block: as Q4_K plus 32 bytes of high bits.
pub(crate) const Q5_K_BYTES: usize = 176;
/// Bytes of a Q6_K super-block: 128 bytes of low nibbles, 64 of high bit pairs, 16 signed
/// 8-bit scales, f16 `d`.
pub(crate) const Q6_K_BYTES: usize = 210;

/// Q5_0 (`MIN = false`: w = (q - 16)·d) or Q5_1 (`MIN = true`: w = q·d + m), q the 5-bit value
/// whose low four bits are the nibbles (element `j < 16` the low nibble of byte `j`, `16 + j`
/// its high one) and whose fifth is bit `j` of the 32-bit `qh`.
pub(crate) fn q5<const MIN: bool>(blocks: &[u8], out: &mut [f32]) {
    let bb = if MIN { Q5_1_BYTES } else { Q5_0_BYTES };
    for (b, o) in blocks.chunks_exact(bb).zip(out.chunks_exact_mut(32)) {
        let d = f16_at(b, 0);
        let (m, rest) = if MIN {
            (f16_at(b, 2), &b[4..])
        } else {
            (0.0, &b[2..])
        };
        let qh = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        for (j, &q) in rest[4..20].iter().enumerate() {
            let h0 = ((qh >> j) << 4) & 0x10;
            let h1 = (qh >> (j + 12)) & 0x10;
            let (x0, x1) = ((q as u32 & 0x0F) | h0, (q as u32 >> 4) | h1);
            if MIN {
                o[j] = x0 as f32 * d + m;
                o[16 + j] = x1 as f32 * d + m;
            } else {
                o[j] = (x0 as i32 - 16) as f32 * d;
                o[16 + j] = (x1 as i32 - 16) as f32 * d;
            }
        }
    }
}

/// Scale and minimum of sub-block `j` (0..8) from Q4_K/Q5_K's 12 packed bytes (llama.cpp's
/// `get_scale_min_k4`): 6 bits each, the first four in the low bits of bytes 0..8, the last
/// four split over bytes 8..12 and the top bits of bytes 0..8.
pub(crate) fn scale_min_bits(s: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// [`scale_min_bits`] as f32.
fn scale_min(s: &[u8], j: usize) -> (f32, f32) {
    let (sc, m) = scale_min_bits(s, j);
    (sc as f32, m as f32)
}

/// Q4_K (`HIGH = false`) or Q5_K (`HIGH = true`): 8 sub-blocks of 32, w = (d·sc)·q - dmin·m.
/// Sub-blocks `2i` and `2i + 1` are the low and high nibbles of bytes `32i..32i + 32`; Q5_K's
/// fifth bit of sub-block `s` is bit `s` of byte `l` of its 32 high-bit bytes.
pub(crate) fn q45_k<const HIGH: bool>(blocks: &[u8], out: &mut [f32]) {
    let bb = if HIGH { Q5_K_BYTES } else { Q4_K_BYTES };
    for (b, o) in blocks
        .chunks_exact(bb)
        .zip(out.chunks_exact_mut(SUPER_BLOCK_ELEMS))
    {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let scales = &b[4..16];
        let (qh, qs) = if HIGH {
            (&b[16..48], &b[48..176])
        } else {
            (&b[..0], &b[16..144])
        };
        for i in 0..4 {
            let (sc0, m0) = scale_min(scales, 2 * i);
            let (sc1, m1) = scale_min(scales, 2 * i + 1);
            let (d0, min0, d1, min1) = (d * sc0, dmin * m0, d * sc1, dmin * m1);
            let o = &mut o[64 * i..64 * i + 64];
            for (l, &q) in qs[32 * i..32 * i + 32].iter().enumerate() {
                let (mut lo, mut hi) = (q as u32 & 0x0F, q as u32 >> 4);
                if HIGH {
                    lo += ((qh[l] as u32 >> (2 * i)) & 1) << 4;
                    hi += ((qh[l] as u32 >> (2 * i + 1)) & 1) << 4;
                }
                o[l] = d0 * lo as f32 - min0;
                o[32 + l] = d1 * hi as f32 - min1;
            }
        }
    }
}

/// Q6_K: 16 sub-blocks of 16, w = (d·sc)·(q - 32), q six bits: four from `ql`, two from `qh`
/// (llama.cpp's interleaving: per half of 128, element `l + 32k` takes nibble `k / 2` of
/// `ql[l + 32 (k % 2)]` and bits `2k..2k + 2` of `qh[l]`).
pub(crate) fn q6_k(blocks: &[u8], out: &mut [f32]) {
    for (b, o) in blocks
        .chunks_exact(Q6_K_BYTES)
        .zip(out.chunks_exact_mut(SUPER_BLOCK_ELEMS))
    {
        let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
        let d = f16_at(b, 208);
        for half in 0..2 {
            let (ql, qh, sc) = (&ql[64 * half..], &qh[32 * half..], &sc[8 * half..]);
            let o = &mut o[128 * half..128 * half + 128];
            for l in 0..32 {
                let is = l / 16;
                let h = qh[l] as i32;
                let q = [
                    (ql[l] as i32 & 0x0F) | ((h & 3) << 4),
                    (ql[l + 32] as i32 & 0x0F) | (((h >> 2) & 3) << 4),
                    (ql[l] as i32 >> 4) | (((h >> 4) & 3) << 4),
                    (ql[l + 32] as i32 >> 4) | (((h >> 6) & 3) << 4),
                ];
                for (k, q) in q.into_iter().enumerate() {
                    let s = sc[is + 2 * k] as i8 as f32;
                    o[l + 32 * k] = d * s * (q - 32) as f32;
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

    #[test]
    fn q5_0_block_by_hand() {
        // d = 0.5, high bits set for elements 0 and 16 + 1 (bit 17): w = (q - 16)/2.
        let mut b = h(0.5).to_vec();
        b.extend((1u32 | (1 << 17)).to_le_bytes());
        b.extend((0..16u8).map(|j| j | (j << 4)));
        let mut w = [0.0; 32];
        q5::<false>(&b, &mut w);
        assert_eq!(w[0], (16.0 - 16.0) * 0.5);
        assert_eq!(w[3], (3.0 - 16.0) * 0.5);
        assert_eq!(w[17], (17.0 - 16.0) * 0.5);
        assert_eq!(w[31], (15.0 - 16.0) * 0.5);
    }

    #[test]
    fn q4_k_scales_unpack_as_llama_cpp() {
        // Sub-block 5: scale from the low nibble of byte 9 and the top bits of byte 1, minimum
        // from the high nibble of byte 9 and the top bits of byte 5.
        let mut s = [0u8; 12];
        s[1] = 0b1100_0011; // scale 1 = 3, top bits 3
        s[5] = 0b0100_0111; // min 1 = 7, top bits 1
        s[9] = 0xA5;
        assert_eq!(scale_min(&s, 1), (3.0, 7.0));
        assert_eq!(
            scale_min(&s, 5),
            ((0x5 | (3 << 4)) as f32, (0xA | (1 << 4)) as f32)
        );
    }

    #[test]
    fn q4_k_block_by_hand() {
        // d = 0.25, dmin = 1; all scales 2, all minimums 1 (sub-blocks 0..4 only, 4..8 zero).
        let mut b = h(0.25).to_vec();
        b.extend(h(1.0));
        b.extend([2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0]);
        b.extend((0..128).map(|l| (l % 16) as u8 | (3 << 4)));
        let mut w = [0.0; 256];
        q45_k::<false>(&b, &mut w);
        assert_eq!(w[5], 0.5 * 5.0 - 1.0);
        assert_eq!(w[32 + 5], 0.5 * 3.0 - 1.0);
        assert_eq!(w[255], 0.0, "sub-block 7 has scale and minimum 0");
    }

    #[test]
    fn q6_k_block_by_hand() {
        // d = 0.5, scales 1..16; every ql byte 0x21 (nibbles 1, 2), qh 0: q - 32 = -31 or -30.
        let mut b = vec![0x21u8; 128];
        b.extend([0u8; 64]);
        b.extend((1..=16).map(|s| s as u8));
        b.extend(h(0.5));
        let mut w = [0.0; 256];
        q6_k(&b, &mut w);
        assert_eq!(w[0], 0.5 * 1.0 * -31.0);
        assert_eq!(w[16], 0.5 * 2.0 * -31.0);
        assert_eq!(w[64], 0.5 * 5.0 * -30.0, "high nibble, scale 5");
        assert_eq!(w[128], 0.5 * 9.0 * -31.0, "second half");
    }
}
