//! The fields of GGUF blocks: read by the legacy formats ([`crate::blocks`]) and the K-quants
//! ([`crate::kquants`]) alike, written by the quantizers ([`crate::quantize`],
//! [`crate::kquantize`]).

use half::f16;

/// The little-endian f16 at byte `i` of `b`, widened (exactly) to f32.
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// `v` as the little-endian f16 GGML stores (round to nearest even, as `GGML_FP32_TO_FP16`).
pub(crate) fn put_f16(out: &mut [u8], v: f32) {
    out[..2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// `v` rounded to f16 and back: the scale a reader will see.
pub(crate) fn through_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}
