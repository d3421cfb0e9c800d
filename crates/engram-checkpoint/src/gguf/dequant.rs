//! Dequantization of GGML tensor types, as llama.cpp's `dequantize_row_*` (f32 arithmetic). The
//! block formats are decoded by [`engram_kernels::BlockFormat`], the same code the CPU inference
//! kernel reads them with.

use engram_kernels::BlockFormat;
use half::f16;

/// GGML tensor types engram reads: the float types, and the block formats of
/// [`engram_kernels::BlockFormat`] (32-weight Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; 256-weight K-quants
/// Q4_K, Q5_K, Q6_K).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    /// f32.
    F32,
    /// f16.
    F16,
    /// bf16.
    BF16,
    /// A quantized block format.
    Block(BlockFormat),
}

impl GgmlType {
    /// Maps the GGUF type id, or returns `Err(name)` with the type's name for unsupported ones.
    pub fn from_id(id: u32) -> Result<Self, String> {
        Ok(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Block(BlockFormat::Q4_0),
            3 => GgmlType::Block(BlockFormat::Q4_1),
            6 => GgmlType::Block(BlockFormat::Q5_0),
            7 => GgmlType::Block(BlockFormat::Q5_1),
            8 => GgmlType::Block(BlockFormat::Q8_0),
            12 => GgmlType::Block(BlockFormat::Q4_K),
            13 => GgmlType::Block(BlockFormat::Q5_K),
            14 => GgmlType::Block(BlockFormat::Q6_K),
            30 => GgmlType::BF16,
            other => return Err(ggml_type_name(other).to_string()),
        })
    }

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
        ggml_type_name(self.id())
    }

    /// Elements per block.
    pub fn block_elems(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Block(f) => f.block_elems(),
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Block(f) => f.block_bytes(),
        }
    }

    /// The block format of a quantized type (`None` for F32, F16 and BF16).
    pub fn block_format(self) -> Option<BlockFormat> {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => None,
            GgmlType::Block(f) => Some(f),
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
        GgmlType::Block(format) => {
            out.resize(
                data.len() / format.block_bytes() * format.block_elems(),
                0.0,
            );
            format.dequantize_into(data, &mut out);
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
    fn block_types_dequantize_as_the_kernels_blocks() {
        // Two Q4_1 blocks (d = 0.25, m = -1): w = q/4 - 1; the block decoding itself is tested
        // by hand in engram-kernels.
        let mut b = Vec::new();
        for _ in 0..2 {
            b.extend(h(0.25));
            b.extend(h(-1.0));
            b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        }
        let w = dequantize(GgmlType::Block(BlockFormat::Q4_1), &b);
        assert_eq!(w.len(), 64);
        assert_eq!((w[1], w[16], w[63]), (-0.75, 2.75, -1.0));
        assert_eq!(
            GgmlType::from_id(8).unwrap().block_format(),
            Some(BlockFormat::Q8_0)
        );
        assert_eq!(GgmlType::BF16.block_format(), None);
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
        assert_eq!(GgmlType::from_id(10), Err("Q2_K".to_string()));
        assert_eq!(GgmlType::from_id(11), Err("Q3_K".to_string()));
        assert_eq!(GgmlType::from_id(99), Err("unknown".to_string()));
        let q4_1 = GgmlType::Block(BlockFormat::Q4_1);
        assert_eq!(q4_1.bytes_for(64), Some(40));
        assert_eq!(q4_1.bytes_for(33), None);
        let q6_k = GgmlType::from_id(14).unwrap();
        assert_eq!(
            (q6_k.bytes_for(512), q6_k.bytes_for(288)),
            (Some(420), None)
        );
    }

    /// Every block format against gguf-py's NumPy dequantization (llama.cpp's own Python
    /// package) of the same random blocks, read from a GGUF file gguf-py wrote
    /// (`tests/peers/make_gguf_quants_fixture.py`): equal bit for bit.
    #[test]
    fn block_formats_dequantize_as_gguf_py() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/gguf-quants");
        let file = crate::gguf::file::GgufFile::open(&dir.join("blocks.gguf")).unwrap();
        let bytes = std::fs::read(dir.join("reference.safetensors")).unwrap();
        let reference = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let mut seen = Vec::new();
        for (name, view) in reference.tensors() {
            let want: Vec<u32> = view
                .data()
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let got: Vec<u32> = file
                .read_f32(&name)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(got.len(), want.len(), "{name}");
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(
                differ,
                0,
                "{name}: {differ} of {} values differ",
                want.len()
            );
            seen.push(name);
        }
        seen.sort();
        assert_eq!(
            seen,
            [
                "q4_0", "q4_1", "q4_k", "q5_0", "q5_1", "q5_k", "q6_k", "q8_0"
            ]
            .map(|f| format!("{f}.weight"))
        );
    }
}
