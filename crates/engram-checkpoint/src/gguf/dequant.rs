//! Dequantization of GGML tensor types, as llama.cpp's `dequantize_row_*` (f32 arithmetic).

use half::f16;

/// GGML tensor types engram reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    /// f32.
    F32,
    /// f16.
    F16,
    /// bf16.
    BF16,
    /// 32 weights: f16 scale `d`, 16 bytes of 4-bit values `q`; w = (q - 8)·d.
    Q4_0,
    /// 32 weights: f16 scale `d`, f16 minimum `m`, 16 bytes of 4-bit values; w = q·d + m.
    Q4_1,
    /// 32 weights: f16 scale `d`, 32 signed bytes; w = q·d.
    Q8_0,
}

impl GgmlType {
    /// Maps the GGUF type id, or returns `Err(name)` with the type's name for unsupported ones.
    pub fn from_id(id: u32) -> Result<Self, String> {
        Ok(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            8 => GgmlType::Q8_0,
            30 => GgmlType::BF16,
            other => return Err(ggml_type_name(other).to_string()),
        })
    }

    /// Elements per block.
    pub fn block_elems(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0 => 32,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q8_0 => 34,
        }
    }

    /// Payload size of `n` elements, or `None` when `n` is not a whole number of blocks.
    pub fn bytes_for(self, n: usize) -> Option<usize> {
        n.is_multiple_of(self.block_elems())
            .then(|| n / self.block_elems() * self.block_bytes())
    }
}

/// The name llama.cpp gives a GGML type id (for error messages).
pub fn ggml_type_name(id: u32) -> &'static str {
    const NAMES: [&str; 31] = [
        "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K",
        "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
        "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16",
    ];
    NAMES.get(id as usize).copied().unwrap_or("unknown")
}

fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// Dequantizes `data` (a whole number of blocks of `ty`) to f32.
pub fn dequantize(ty: GgmlType, data: &[u8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(data.len() / ty.block_bytes() * ty.block_elems());
    match ty {
        GgmlType::F32 => out.extend(
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        ),
        GgmlType::F16 => out.extend(data.chunks_exact(2).map(|c| f16_at(c, 0))),
        GgmlType::BF16 => out.extend(
            data.chunks_exact(2)
                .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()),
        ),
        GgmlType::Q4_0 => {
            for b in data.chunks_exact(18) {
                let d = f16_at(b, 0);
                let qs = &b[2..18];
                out.extend(qs.iter().map(|q| ((q & 0x0F) as i32 - 8) as f32 * d));
                out.extend(qs.iter().map(|q| ((q >> 4) as i32 - 8) as f32 * d));
            }
        }
        GgmlType::Q4_1 => {
            for b in data.chunks_exact(20) {
                let d = f16_at(b, 0);
                let m = f16_at(b, 2);
                let qs = &b[4..20];
                out.extend(qs.iter().map(|q| (q & 0x0F) as f32 * d + m));
                out.extend(qs.iter().map(|q| (q >> 4) as f32 * d + m));
            }
        }
        GgmlType::Q8_0 => {
            for b in data.chunks_exact(34) {
                let d = f16_at(b, 0);
                out.extend(b[2..34].iter().map(|&q| (q as i8) as f32 * d));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: f32) -> [u8; 2] {
        f16::from_f32(v).to_bits().to_le_bytes()
    }

    #[test]
    fn q4_0_block_by_hand() {
        // d = 0.5; byte j holds low nibble j % 16 and high nibble 15 - j % 16.
        let mut b = h(0.5).to_vec();
        for j in 0..16u8 {
            b.push(j | ((15 - j) << 4));
        }
        let w = dequantize(GgmlType::Q4_0, &b);
        assert_eq!(w.len(), 32);
        for j in 0..16 {
            assert_eq!(w[j], (j as f32 - 8.0) * 0.5, "low nibble {j}");
            assert_eq!(w[16 + j], ((15 - j) as f32 - 8.0) * 0.5, "high nibble {j}");
        }
        assert_eq!(w[0], -4.0);
        assert_eq!(w[16], 3.5);
    }

    #[test]
    fn q4_1_block_by_hand() {
        // d = 0.25, m = -1.0: w = q/4 - 1.
        let mut b = h(0.25).to_vec();
        b.extend(h(-1.0));
        for j in 0..16u8 {
            b.push(((j * 7) % 16) | (j << 4));
        }
        let w = dequantize(GgmlType::Q4_1, &b);
        assert_eq!(w.len(), 32);
        for j in 0..16 {
            assert_eq!(w[j], ((j * 7) % 16) as f32 * 0.25 - 1.0);
            assert_eq!(w[16 + j], j as f32 * 0.25 - 1.0);
        }
        assert_eq!(w[17], -0.75);
        assert_eq!(w[31], 2.75);
    }

    #[test]
    fn q8_0_block_by_hand() {
        let mut b = h(0.125).to_vec();
        for j in 0..32i32 {
            b.push(((j - 16) * 8) as i8 as u8);
        }
        let w = dequantize(GgmlType::Q8_0, &b);
        assert_eq!(w.len(), 32);
        assert_eq!(w[0], -16.0);
        assert_eq!(w[16], 0.0);
        assert_eq!(w[31], 15.0);
        for (j, v) in w.iter().enumerate() {
            assert_eq!(*v, (j as f32 - 16.0) * 8.0 * 0.125);
        }
    }

    #[test]
    fn f16_bf16_f32_blocks_by_hand() {
        let mut b = Vec::new();
        for v in [1.0f32, -2.5, 65504.0] {
            b.extend(h(v));
        }
        assert_eq!(dequantize(GgmlType::F16, &b), vec![1.0, -2.5, 65504.0]);
        let bf: Vec<u8> = [0x3F80u16, 0xC020, 0x4049]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(dequantize(GgmlType::BF16, &bf), vec![1.0, -2.5, 3.140625]);
        let f: Vec<u8> = [0.1f32, -7.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(dequantize(GgmlType::F32, &f), vec![0.1, -7.0]);
    }

    #[test]
    fn unsupported_types_are_named() {
        assert_eq!(GgmlType::from_id(12), Err("Q4_K".to_string()));
        assert_eq!(GgmlType::from_id(14), Err("Q6_K".to_string()));
        assert_eq!(GgmlType::from_id(99), Err("unknown".to_string()));
        assert_eq!(GgmlType::Q4_1.bytes_for(64), Some(40));
        assert_eq!(GgmlType::Q4_1.bytes_for(33), None);
    }
}
