//! Writing GGML tensor types: f32 values encoded as a GGUF tensor's payload — the float types
//! rounded to nearest even, the block formats as llama.cpp's reference quantizers write them
//! ([`engram_kernels::quantize`]).

use super::dequant::GgmlType;
use crate::{FloatFormat, encode_f32};

/// `values` as a tensor payload of type `ty` (for a matrix stored `[out, in]`, row after row).
///
/// # Panics
/// If `values` is not a whole number of blocks ([`GgmlType::bytes_for`] says).
pub fn encode(ty: GgmlType, values: &[f32]) -> Vec<u8> {
    match ty {
        GgmlType::F32 => encode_f32(values, FloatFormat::F32),
        GgmlType::F16 => encode_f32(values, FloatFormat::F16),
        GgmlType::BF16 => encode_f32(values, FloatFormat::BF16),
        GgmlType::Block(f) => engram_kernels::quantize(f, values),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_encodings_read_back() {
        let x: Vec<f32> = (0..512)
            .map(|i| ((i * 7919) % 61) as f32 / 61.0 - 0.5)
            .collect();
        for id in [0, 1, 2, 3, 6, 7, 8, 12, 13, 14, 30] {
            let ty = GgmlType::from_id(id).unwrap();
            assert_eq!(ty.id(), id, "{}", ty.name());
            let bytes = encode(ty, &x);
            assert_eq!(Some(bytes.len()), ty.bytes_for(x.len()), "{}", ty.name());
            let back = super::super::dequantize(ty, &bytes);
            let worst = x
                .iter()
                .zip(&back)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(worst < 0.07, "{}: {worst}", ty.name());
        }
    }
}
