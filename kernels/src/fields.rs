//! The fields of GGUF blocks: read by the legacy formats ([`crate::blocks`]) and the K-quants
//! ([`crate::kquants`]) alike.

use half::f16;

/// The little-endian f16 at byte `i` of `b`, widened (exactly) to f32.
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}
