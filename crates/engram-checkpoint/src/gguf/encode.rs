//! Writing GGML tensor types: f32 values encoded as a GGUF tensor's payload — the float types
//! rounded to nearest even, the block formats as llama.cpp's reference quantizers write them
//! ([`engram_kernels::BlockFormat::quantize`]).

use engram_kernels::BlockFormat;

use super::dequant::GgmlType;
use crate::{FloatFormat, encode_f32};

impl GgmlType {
    /// The GGUF type id (the inverse of [`GgmlType::from_id`]).
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::BF16 => 30,
            GgmlType::Block(f) => match f {
                BlockFormat::Q4_0 => 2,
                BlockFormat::Q4_1 => 3,
                BlockFormat::Q5_0 => 6,
                BlockFormat::Q5_1 => 7,
                BlockFormat::Q8_0 => 8,
                BlockFormat::Q4_K => 12,
                BlockFormat::Q5_K => 13,
                BlockFormat::Q6_K => 14,
            },
        }
    }

    /// The type's name as llama.cpp prints it.
    pub fn name(self) -> &'static str {
        super::dequant::ggml_type_name(self.id())
    }

    /// `values` as this type's payload (for a matrix stored `[out, in]`, row after row).
    ///
    /// # Panics
    /// If `values` is not a whole number of blocks ([`GgmlType::bytes_for`] says).
    pub fn encode(self, values: &[f32]) -> Vec<u8> {
        match self {
            GgmlType::F32 => encode_f32(values, FloatFormat::F32),
            GgmlType::F16 => encode_f32(values, FloatFormat::F16),
            GgmlType::BF16 => encode_f32(values, FloatFormat::BF16),
            GgmlType::Block(f) => f.quantize(values),
        }
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
            let bytes = ty.encode(&x);
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
